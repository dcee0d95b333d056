"""The head-ablation scan: ablate each head alone, measure KV retrieval, rank by the drop.

The paper's code reruns the whole model for every head, one forward per answer choice.
Here, per batch of prompts: the residual stream entering every layer is computed in one
forward; then per layer l all of l's single-head ablations run as one batch (copy a of the
batch has head a zeroed) through layers l..L only; every choice is read off the same forward. Same numbers
as the naive loop (:func:`naive_scan_heads`, kept as the reference), many times faster.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import ConfigError, HeadIndexError
from ..interventions import ablate_heads, capture_layer_inputs, head_mask, start_at_layer
from ..models import adapter_for
from ..models.description import Mixer
from ..probes.scoring import (EncodedProbe, ProbeScore, accepts_logits_to_keep, copies_choice_logprobs, fp32_logits,
                             iter_batches, score)

# Log-prob drops closer than this are ties: the model's own rounding carried through its layers.
# bf16 keeps 8 significant bits (2^-8 ~ 0.004 relative): micro-llama's bf16 scan moves heads' drops
# by up to 0.004 nats from its fp32 scan; fp16 keeps 11 bits. float32/64: as before, only float
# noise between batched and unbatched sums.
LOGPROB_RESOLUTION = {torch.bfloat16: 1e-2, torch.float16: 1e-3}
FP32_RESOLUTION = 1e-6

COLUMNS = ["model", "layer", "head", "kind", "accuracy", "drop", "rank", "answer_logprob", "logprob_drop",
           "baseline_accuracy", "n_examples"]


def _select(model: nn.Module, kinds=None, layers=None) -> list[Mixer]:
    desc = adapter_for(model).describe()
    for layer in layers or []:
        desc.check_layer(layer)
    found = [m for m in desc.mixers if (kinds is None or m.kind in kinds) and (layers is None or m.layer in layers)]
    if not found:
        raise HeadIndexError(f"no mixers of kinds {kinds} in layers {layers}; the model has "
                             f"{sorted({m.kind for m in desc.mixers})} in {desc.n_layers} layers")
    return found


def logprob_resolution(model: nn.Module) -> float:
    """The log-prob drop below which two heads of ``model`` tie (by the dtype it computes in)."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return LOGPROB_RESOLUTION.get(dtype, FP32_RESOLUTION)


def rank_heads(rows: list[dict], baseline: torch.Tensor, encoded: EncodedProbe, model_name: str,
               resolution: float = FP32_RESOLUTION) -> pd.DataFrame:
    """Tidy table, one row per head, ranked by accuracy drop, then log-prob drop rounded to
    ``resolution`` nats; heads equal in both are ties, ordered by position (layer, kind, head)."""
    base_acc = baseline.argmax(-1).eq(encoded.answers).double().mean().item()
    base_lp = baseline.gather(1, encoded.answers[:, None]).mean().item()
    df = pd.DataFrame(rows)
    df["model"], df["baseline_accuracy"], df["n_examples"] = model_name, base_acc, len(encoded)
    df["drop"] = base_acc - df["accuracy"]
    df["logprob_drop"] = base_lp - df["answer_logprob"]
    # Rounding before sorting keeps rounding noise (the dtype's, batched vs unbatched sums) from
    # ordering ties; + 0.0 makes -0.0 and 0.0 one value.
    df["_d"], df["_l"] = tie_keys(df["drop"], df["logprob_drop"], resolution)
    df = df.sort_values(["_d", "_l", "layer", "kind", "head"], ascending=[False, False, True, True, True])
    df["rank"] = range(1, len(df) + 1)
    return df[COLUMNS].reset_index(drop=True)


def tie_keys(drop, logprob_drop, resolution: float):
    """What a ranking compares (floats or Series): the accuracy drop rounded to 1e-9, then the
    log-prob drop rounded to ``resolution`` nats (+ 0.0 makes -0.0 and 0.0 one value)."""
    return np.round(drop, 9), np.round(logprob_drop / resolution) * resolution + 0.0


def _tally(rows_acc, mixer: Mixer, heads, lp: torch.Tensor, answers: torch.Tensor) -> None:
    """Accumulate correct counts and correct-answer log-probs; lp is (A, E, C) for heads (A,)."""
    correct = lp.argmax(-1).eq(answers).sum(-1)
    ans_lp = lp.gather(2, answers.expand(len(heads), -1)[..., None]).squeeze(-1).sum(-1)
    for a, h in enumerate(heads):
        acc = rows_acc[(mixer.layer, mixer.kind, h)]
        acc[0] += int(correct[a])
        acc[1] += float(ans_lp[a])


@torch.no_grad()
def scan_heads(model: nn.Module, encoded: EncodedProbe, batch_size: int = 32, max_rows: int = 256,
               kinds=None, layers=None, model_name: str = "", progress: bool = True, heads=None,
               baseline: ProbeScore | None = None) -> pd.DataFrame:
    """Accuracy on ``encoded`` with each head alone ablated, for every head of the chosen mixers.

    ``max_rows`` bounds a forward's batch (ablation copies x rows); lower it to save memory.
    ``heads``: only these ``(layer, head, kind)`` (``atp+exact``'s candidates); default all.
    ``baseline``: the unmodified model's score on ``encoded`` where the caller has it (the probe check).
    Returns the ranked tidy table (see ``COLUMNS``).
    """
    mixers = _select(model, kinds, layers)
    if heads is not None:
        wanted = {(int(l), str(k), int(h)) for l, h, k in heads}
        mixers = [m for m in mixers if any((m.layer, m.kind, h) in wanted for h in range(m.n_heads))]
    device = next(model.parameters()).device
    baseline = (score(model, encoded, batch_size=batch_size) if baseline is None else baseline).logprobs
    keep = accepts_logits_to_keep(model)
    totals: dict = defaultdict(lambda: [0, 0.0])
    batches = [b.to(device) for b in iter_batches(encoded, batch_size)]
    by_layer: dict[int, list[Mixer]] = defaultdict(list)
    for m in mixers:
        by_layer[m.layer].append(m)
    with fp32_logits(model) as head:  # the head's fp32 copy made once per scan
        for b in tqdm(batches, desc="head scan", unit="batch", disable=not progress):
            answers = encoded.answers[b.examples.cpu()].to(device)
            B = b.input_ids.shape[0]
            # every scanned layer's input from one forward (one batch's residuals held, layers x (B, T, d))
            inputs = capture_layer_inputs(model, sorted(by_layer), input_ids=b.input_ids,
                                          attention_mask=b.attention_mask, use_cache=False)
            for layer in sorted(by_layer):
                hidden = inputs.pop(layer)
                for mixer in by_layer[layer]:
                    per = max(1, max_rows // B)
                    todo = [h for h in range(mixer.n_heads) if heads is None or (mixer.layer, mixer.kind, h) in wanted]
                    for start in range(0, len(todo), per):
                        chunk = todo[start:start + per]
                        A = len(chunk)
                        mask = torch.ones(A, B, mixer.n_heads, device=device)
                        mask[torch.arange(A), :, torch.tensor(chunk)] = 0
                        with start_at_layer(model, layer, hidden.repeat(A, 1, 1)), \
                                head_mask(model, layer, mask.view(A * B, -1), mixer.kind):
                            lp = copies_choice_logprobs(model, b, head, keep, A)  # (A, E, C)
                        _tally(totals, mixer, chunk, lp.cpu(), answers.cpu())
    rows = [dict(layer=l, kind=k, head=h, accuracy=c / len(encoded), answer_logprob=s / len(encoded))
            for (l, k, h), (c, s) in totals.items()]
    return rank_heads(rows, baseline, encoded, model_name, logprob_resolution(model))


@torch.no_grad()
def naive_scan_heads(model: nn.Module, encoded: EncodedProbe, kinds=None, layers=None, model_name: str = "",
                     progress: bool = False) -> pd.DataFrame:
    """The reference: like the paper's code, the whole model once per head and per answer choice."""
    mixers = _select(model, kinds, layers)
    device = next(model.parameters()).device

    def logprobs() -> torch.Tensor:
        out = torch.empty(len(encoded), encoded.n_choices, dtype=torch.float64)
        with fp32_logits(model):
            for n, (prompt, conts) in enumerate(zip(encoded.prompt_ids, encoded.choice_ids)):
                for c, cont in enumerate(conts):
                    ids = torch.tensor([prompt + cont], device=device)
                    lp = model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1:-1].float().log_softmax(-1)
                    out[n, c] = lp.gather(1, torch.tensor(cont, device=device)[:, None]).sum().item()
        return out

    baseline = logprobs()
    rows = []
    heads = [(m, h) for m in mixers for h in range(m.n_heads)]
    for m, h in tqdm(heads, desc="naive scan", disable=not progress):
        with ablate_heads(model, [(m.layer, h, m.kind)]):
            lp = logprobs()
        rows.append(dict(layer=m.layer, kind=m.kind, head=h,
                         accuracy=lp.argmax(-1).eq(encoded.answers).double().mean().item(),
                         answer_logprob=lp.gather(1, encoded.answers[:, None]).mean().item()))
    return rank_heads(rows, baseline, encoded, model_name, logprob_resolution(model))


METHODS = ("exact", "atp", "atp+exact")


def scan(model: nn.Module, encoded: EncodedProbe, method: str = "exact", batch_size: int = 32, max_rows: int = 256,
         kinds=None, layers=None, model_name: str = "", progress: bool = True, baseline: ProbeScore | None = None,
         **atp) -> tuple[pd.DataFrame, dict]:
    """``(ranking, guard)`` by ``method``: ``exact`` is :func:`scan_heads` (the paper's ranking);
    ``atp`` and ``atp+exact`` are :func:`gna.scan.attribution_ranking.attribution_ranking`, which takes
    ``atp`` (candidates, guard_sample, guard_k, guard_level, atp_score, graddrop, ig_steps, seed; ``exact`` ignores
    them)."""
    if method not in METHODS:
        raise ConfigError(f"scan.method = {method!r}: expected one of {', '.join(METHODS)}")
    common = dict(batch_size=batch_size, max_rows=max_rows, kinds=kinds, layers=layers, model_name=model_name,
                  progress=progress, baseline=baseline)
    if method == "exact":
        ranking = scan_heads(model, encoded, **common)
        return ranking, dict(method="exact", n_heads=len(ranking))
    from .attribution_ranking import attribution_ranking

    return attribution_ranking(model, encoded, method, **atp, **common)


def top_k(ranking: pd.DataFrame, k: int, kinds=None) -> list[tuple[int, int, str]]:
    """The ``k`` highest-ranked heads as ``(layer, head, kind)``, optionally of some kinds only."""
    df = ranking if kinds is None else ranking[ranking["kind"].isin(kinds)]
    if not isinstance(k, int) or not 0 <= k <= len(df):
        raise HeadIndexError(f"top-k: k={k!r} but the ranking has {len(df)} heads")
    df = df.sort_values("rank").head(k)
    return [(int(r.layer), int(r.head), str(r.kind)) for r in df.itertuples()]
