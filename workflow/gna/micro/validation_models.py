"""The fast scan's validation models: micro-recipe models with many narrow heads.

The micro study's own models have 24-40 heads, too few to tell a fast scan's ranking from its
budget: with 24 heads ablated out of 24 the exact scan ranks them all. These models have at
least 128 heads each (more layers and more, narrower heads than the micro models), so that
"recall of the exact top-10 with at most 15% of the heads ablated" is a real test. They are
trained with the micro recipe's first phase only (KV dictionary, facts, induction segment:
the in-context retrieval the scan's KV probe measures). ``snakemake retrain_validation_models``
trains them into ``results/validation/models/``; a model that retrieves is copied to
``data/models/<name>``, where benchmarks/atp_recall.py finds it. Neither has retrieved yet (one
seed each; docs/fast-scan.md has the training curves and what to try next).
"""
from __future__ import annotations

import copy
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
    # 8 layers x 16 heads of width 8 = 128 attention heads (micro-llama: 6 x 4 of width 16), hidden 64.
    "val-llama": {
        "family": "llama", "seed": 0,
        "model": {"num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 8},
        "train": _phase1(800, {"kv8": 0.9, "kv16": 0.8, "knowledge": 0.9}),
    },
    # Zamba2-style hybrid, 6 layers (mamba, hybrid) x 3: 6 x 16 Mamba-2 heads of width 8 and
    # 3 invocations x 16 attention heads of width 8 (the shared block sees 2 x hidden) = 144 heads.
    "val-zamba2": {
        "family": "zamba2", "seed": 0,
        "model": {"num_hidden_layers": 6, "layers_block_type": ["mamba", "hybrid"] * 3,
                  "n_mamba_heads": 16, "num_attention_heads": 16, "num_key_value_heads": 16},
        "train": _phase1(600, {"kv8": 0.8, "kv16": 0.6, "knowledge": 0.9}),
    },
}


def validation_models() -> dict[str, dict[str, Any]]:
    """A deep copy of :data:`VALIDATION_MODELS` (name -> family, seed, model and train overrides)."""
    return copy.deepcopy(VALIDATION_MODELS)
