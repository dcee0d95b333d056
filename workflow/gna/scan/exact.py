"""The head-ablation scan: ablate each head alone, measure KV retrieval, rank by the drop.

The paper's code reruns the whole model for every head, one forward per answer choice.
Here, per batch of prompts: the residual stream entering every layer is computed in one
forward; then per layer l all of l's single-head ablations run as one batch (copy a of the
batch has head a zeroed) through layers l..L only; every choice is read off the same forward. Same numbers
as the naive loop (:func:`naive_scan_heads`, kept as the reference), many times faster.
"""
from __future__ import annotations

from collections import defaultdict

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..interventions import ablate_heads, head_mask
from ..probes.encoded import EncodedProbe
from ..probes.scoring import ProbeScore, fp32_logits, score
from .ranking import CHANGED, logprob_resolution, rank_heads, select_mixers
from .repeated_forwards import ANSWER_LOGPROB, CORRECT, DISCORDANT, ResidualCache, repeated_forward_scores


def _wanted(heads) -> set[tuple[int, int, str]] | None:
    """``heads`` as a set of ``(layer, head, kind)``, the order every head of the scan is in (None: all)."""
    return None if heads is None else {(int(l), int(h), str(k)) for l, h, k in heads}


@torch.no_grad()
def scan_heads(model: nn.Module, encoded: EncodedProbe, batch_size: int = 32, max_rows: int = 256,
               kinds=None, layers=None, model_name: str = "", progress: bool = True, heads=None,
               baseline: ProbeScore | None = None, discordant: bool = False,
               residuals: ResidualCache | None = None) -> pd.DataFrame:
    """Accuracy on ``encoded`` with each head alone ablated, for every head of the chosen mixers.

    ``max_rows`` bounds a forward's batch (ablation copies x rows); lower it to save memory.
    ``heads``: only these ``(layer, head, kind)`` (``atp+exact``'s candidates); default all.
    ``baseline``: the unmodified model's score on ``encoded`` where the caller has it (the probe check).
    ``discordant``: add a column of that name, the prompts whose correctness the ablation changes
    (either way), and ``CHANGED``, those it turns wrong and those it turns right: a paired (McNemar)
    test of the drop on these prompts, without ablating the head again.
    ``residuals``: the clean forwards of an earlier scan of ``encoded`` at this ``batch_size``, reused
    (:class:`gna.scan.repeated_forwards.ResidualCache`).
    Returns the ranked tidy table (see ``COLUMNS``).
    """
    mixers = select_mixers(model, kinds, layers)
    wanted = _wanted(heads)
    # one item per head scanned, in mixer order; a chunk of copies never spans two mixers
    items = [(i, m, h) for i, m in enumerate(mixers) for h in range(m.n_heads)
             if wanted is None or (m.layer, h, m.kind) in wanted]
    by_layer: dict[int, list[int]] = defaultdict(list)
    for n, (_, m, _) in enumerate(items):
        by_layer[m.layer].append(n)
    baseline = score(model, encoded, batch_size=batch_size) if baseline is None else baseline

    def ablate_each(stack, layer: int, chunk: list[int], x: torch.Tensor) -> None:
        mixer = items[chunk[0]][1]
        A = len(chunk)
        mask = torch.ones(A, x.shape[0] // A, mixer.n_heads, device=x.device)
        mask[torch.arange(A), :, torch.tensor([items[n][2] for n in chunk])] = 0
        stack.enter_context(head_mask(model, layer, mask.view(x.shape[0], -1), mixer.kind))

    totals, _ = repeated_forward_scores(model, encoded, by_layer, len(items), ablate_each, batch_size=batch_size,
                                        max_rows=max_rows, baseline=baseline, group_of=lambda n: items[n][0],
                                        progress=progress, desc="head scan", residuals=residuals,
                                        resume_key=[(m.layer, h, m.kind) for _, m, h in items])
    rows = [dict(layer=m.layer, kind=m.kind, head=h, accuracy=totals[n, CORRECT].item() / len(encoded),
                 answer_logprob=totals[n, ANSWER_LOGPROB].item() / len(encoded)) for n, (_, m, h) in enumerate(items)]
    ranked = rank_heads(rows, baseline.logprobs, encoded, model_name, logprob_resolution(model))
    if discordant:
        # right->wrong minus wrong->right is the drop in correct prompts, their sum the discordant ones
        base_right = int(baseline.logprobs.argmax(-1).eq(encoded.answers).sum())
        changed = {(m.layer, h, m.kind): (int(totals[n, DISCORDANT].item()),
                                          base_right - int(totals[n, CORRECT].item()))
                   for n, (_, m, h) in enumerate(items)}
        both = [changed[(r.layer, r.head, r.kind)] for r in ranked.itertuples()]
        ranked["discordant"] = [d for d, _ in both]
        ranked[CHANGED[0]] = [(d + lost) // 2 for d, lost in both]
        ranked[CHANGED[1]] = [(d - lost) // 2 for d, lost in both]
    return ranked


@torch.no_grad()
def naive_scan_heads(model: nn.Module, encoded: EncodedProbe, kinds=None, layers=None, model_name: str = "",
                     progress: bool = False, heads=None) -> pd.DataFrame:
    """The reference: like the paper's code, the whole model once per head and per answer choice.
    ``heads``: only these ``(layer, head, kind)``, as :func:`scan_heads` takes them; default all."""
    mixers = select_mixers(model, kinds, layers)
    wanted = _wanted(heads)
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
    todo = [(m, h) for m in mixers for h in range(m.n_heads) if wanted is None or (m.layer, h, m.kind) in wanted]
    for m, h in tqdm(todo, desc="naive scan", disable=not progress):
        with ablate_heads(model, [(m.layer, h, m.kind)]):
            lp = logprobs()
        rows.append(dict(layer=m.layer, kind=m.kind, head=h,
                         accuracy=lp.argmax(-1).eq(encoded.answers).double().mean().item(),
                         answer_logprob=lp.gather(1, encoded.answers[:, None]).mean().item()))
    return rank_heads(rows, baseline, encoded, model_name, logprob_resolution(model))
