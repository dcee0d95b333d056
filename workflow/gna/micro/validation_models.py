"""The fast scan's validation models: micro-recipe models with many narrow heads.

The micro study's own models have 24-40 heads, too few to tell a fast scan's ranking from its
budget: with 24 heads ablated out of 24 the exact scan ranks them all. These models have at
least 128 heads each (more and narrower heads than the micro models), so that "recall of the
exact top-10 with at most 15% of the heads ablated" is a real test. They are trained with the
micro recipe's first phase only (KV dictionary, facts, induction segment: the in-context
retrieval the scan's KV probe measures), which ends once its targets are met.
``snakemake retrain_validation_models`` trains them into ``results/validation/models/``; the
shipped copies are in ``data/models/<name>``, where benchmarks/atp_recall.py finds them and
scans them on a KV probe of ``probe_pairs`` pairs and ``probe_examples`` prompts (default 200).
docs/fast-scan.md has the training curves.
"""
from __future__ import annotations

from typing import Any

# Phase 1 of the micro recipe (gna.micro.recipes): short rows, KV curriculum up to 16 pairs,
# ending once retrieval is learned; no MMLU-format phases (the scan's probe is KV retrieval).
_RETRIEVAL_ONLY = {"mmlu_prob": 0.0, "record_prob": 0.0, "passage_prob": 0.0, "chain_prob": 0.0}


def _phase1(steps: int, targets: dict[str, float]) -> dict[str, Any]:
    return {
        "max_steps": steps, "eval_every": 50, "targets": dict(targets),
        "phases": [{"name": "retrieval", "steps": steps, "targets": dict(targets),
                    "corpus": dict(_RETRIEVAL_ONLY)}],
    }


VALIDATION_MODELS: dict[str, dict[str, Any]] = {
    # 2 layers x 64 heads of width 8 = 128 attention heads, hidden 64 (micro-llama: 6 x 4 of width 16).
    # Two layers: the recipe's depth, at which its 4-head model forms the induction head in ~350 steps
    # on every seed tried; 8 layers x 16 heads missed it in 800 steps. This one retrieves from step
    # ~1,000 and meets its targets at 1,200 (docs/fast-scan.md), hence the 1,500-step budget.
    # Its probe: 24 pairs (past the curriculum's 16: harder, so more heads share the work) and 2,000
    # prompts, so that drops of 2-3 points clear the noise; on 16 pairs 8 heads do (docs/fast-scan.md).
    "val-llama": {
        "family": "llama", "seed": 0, "probe_pairs": 24, "probe_examples": 2000,
        "model": {"num_hidden_layers": 2, "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 8},
        "train": _phase1(1500, {"kv8": 0.9, "kv16": 0.8, "knowledge": 0.9}),
    },
    # Mamba-2, 2 layers x 64 heads of width 4 (expand 4: inner width 256), state 64 = 128 heads.
    # Trained for its 1,500 steps it retrieves only partly (kv8 .34) and no head is beyond noise:
    # not shipped (docs/fast-scan.md). Kept as the record of what was run.
    # State 64 and two layers: the shape that learned retrieval in phase 1 in the recipe notes.
    # chunk_size 8: the PyTorch SSD path's cost grows with heads x state x chunk (it forms C.B per
    # head and position pair of a chunk), and the result does not depend on it (up to rounding);
    # at 64 heads per layer a step at chunk 64 cost 2-3x one at 16.
    "val-mamba2": {
        "family": "mamba2", "seed": 0, "probe_pairs": 16,
        "model": {"num_hidden_layers": 2, "num_heads": 64, "head_dim": 4, "expand": 4, "chunk_size": 8},
        "train": _phase1(1500, {"kv8": 0.85, "kv16": 0.6, "knowledge": 0.9}),
    },
    # Bamba (Mamba-2 and attention layers): Mamba-2, attention, Mamba-2, attention; 32 heads per layer
    # (attention of width 8, Mamba-2 of width 4 with state 16) = 64 attention + 64 Mamba-2 heads.
    # State 16: a Mamba-2 stack of that state stays at chance on KV retrieval (recipe notes), so the
    # attention layers carry it, as in the paper's hybrids. With one attention layer (Mamba-2, attention,
    # Mamba-2, Mamba-2, same widths) KV stayed at chance through 1,380 steps; this shape retrieves from
    # step ~900 and ends its 2,000 steps at kv4 / kv8 / kv16 .94 / .86 / .69 (docs/fast-scan.md).
    # chunk 16: the PyTorch SSD path's cost follows heads x chunk (val-mamba2 above).
    "val-bamba": {
        "family": "bamba", "seed": 0, "probe_pairs": 16, "probe_examples": 2000,
        "model": {"num_hidden_layers": 4, "attn_layer_indices": [1, 3], "num_attention_heads": 32,
                  "num_key_value_heads": 32, "head_dim": 8, "mamba_n_heads": 32, "mamba_d_head": 4,
                  "mamba_chunk_size": 16},
        "train": _phase1(2000, {"kv8": 0.9, "kv16": 0.8, "knowledge": 0.9}),
    },
}
