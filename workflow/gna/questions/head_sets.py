"""The KV score with sets of heads ablated together, batched as :func:`gna.scan.scan_heads` batches
single heads: per batch of prompts the residual entering every needed layer comes from one forward;
then the sets whose lowest layer is l run from layer l on, copy a of the batch with set a's heads
zeroed (one ``head_mask`` per mixer a set touches). A set of one head gives the scan's numbers.
"""
from __future__ import annotations

from collections import defaultdict
from contextlib import ExitStack

import pandas as pd
import torch
from torch import nn

from ..errors import HeadIndexError
from ..interventions import capture_layer_inputs, head_mask, start_at_layer
from ..models import adapter_for
from ..probes.scoring import (EncodedProbe, ProbeScore, accepts_logits_to_keep, copies_choice_logprobs, fp32_logits,
                              iter_batches, score)
from .names import Head, set_name  # noqa: F401  (set_name: the tables' names, imported from here too)


def margins(lp: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """The log-prob margin of each example: the right choice's log-prob minus the best other's.
    lp (..., E, C), answers (E,) -> (..., E)."""
    right = lp.gather(-1, answers.expand(*lp.shape[:-1])[..., None]).squeeze(-1)
    others = lp.scatter(-1, answers.expand(*lp.shape[:-1])[..., None], float("-inf"))
    return right - others.max(-1).values


def _check(model: nn.Module, sets) -> list[tuple[Head, ...]]:
    desc = adapter_for(model).describe()
    out = []
    for s in sets:
        heads = tuple(sorted({(int(l), int(h), str(k)) for l, h, k in s}))
        if not heads:
            raise HeadIndexError("an ablation set is empty (the unablated model is the baseline)")
        for l, h, k in heads:
            desc.head((l, h, k))  # raises HeadIndexError naming the head
        out.append(heads)
    return out


def repeated_forward_scores(model: nn.Module, encoded: EncodedProbe, by_start: dict[int, list[int]], n_items: int,
                            intervene, prepare=None, batch_size: int = 32, max_rows: int = 256,
                            baseline: ProbeScore | None = None) -> tuple[torch.Tensor, dict]:
    """The scan's batching for any intervention on items (a set of heads, a path): per batch of prompts
    the residual entering every layer of ``by_start`` ({layer: the items that start there}) from one
    forward; then chunks of items, copy a of the batch for item a, through the layers from there on.

    ``prepare(batch, inputs)`` -> a batch's state (e.g. the senders' writes); ``intervene(stack, state,
    layer, chunk, x)`` enters the chunk's contexts on ``stack`` (``x``: the repeated layer input, (A*B,
    T, d)). Returns per item the summed correct count, answer log-prob and margin ``(n_items, 3)``,
    and the unmodified model's means (``baseline_accuracy``, ``baseline_logprob``, ``baseline_margin``)."""
    device = next(model.parameters()).device
    base = (score(model, encoded, batch_size=batch_size) if baseline is None else baseline).logprobs
    keep = accepts_logits_to_keep(model)
    totals = torch.zeros(n_items, 3, dtype=torch.float64)
    with fp32_logits(model) as head:
        for b in iter_batches(encoded, batch_size):
            b = b.to(device)
            answers = encoded.answers[b.examples.cpu()]
            B = b.input_ids.shape[0]
            inputs = capture_layer_inputs(model, sorted(by_start), input_ids=b.input_ids,
                                          attention_mask=b.attention_mask, use_cache=False)
            state = prepare(b, inputs) if prepare else None
            per = max(1, max_rows // B)
            for start in sorted(by_start):
                hidden = inputs[start]
                todo = by_start[start]
                for c in range(0, len(todo), per):
                    chunk = todo[c:c + per]
                    A = len(chunk)
                    x = hidden.repeat(A, 1, 1)
                    with ExitStack() as stack:
                        stack.enter_context(start_at_layer(model, start, x))
                        intervene(stack, state, start, chunk, x)
                        lp = copies_choice_logprobs(model, b, head, keep, A).cpu()  # (A, E, C)
                    totals[chunk, 0] += lp.argmax(-1).eq(answers).double().sum(-1)
                    totals[chunk, 1] += lp.gather(2, answers.expand(A, -1)[..., None]).squeeze(-1).sum(-1)
                    totals[chunk, 2] += margins(lp, answers).sum(-1)
    return totals, dict(baseline_accuracy=base.argmax(-1).eq(encoded.answers).double().mean().item(),
                        baseline_logprob=base.gather(1, encoded.answers[:, None]).mean().item(),
                        baseline_margin=margins(base, encoded.answers).mean().item())


@torch.no_grad()
def ablate_sets(model: nn.Module, encoded: EncodedProbe, sets, batch_size: int = 32, max_rows: int = 256,
                baseline: ProbeScore | None = None) -> pd.DataFrame:
    """One row per set of ``(layer, head, kind)``: ``accuracy``, ``answer_logprob``, ``margin`` (means
    over the examples) with the set ablated, and the same three of the unablated model
    (``baseline_*``). ``max_rows`` bounds a forward's batch (sets x prompts)."""
    sets = _check(model, sets)
    desc = adapter_for(model).describe()
    by_start: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(sets):
        by_start[min(l for l, _, _ in s)].append(i)

    def intervene(stack, _, start, chunk, x):
        A, B = len(chunk), x.shape[0] // len(chunk)
        masks: dict = {}
        for a, i in enumerate(chunk):
            for l, h, k in sets[i]:
                mixer = desc.mixer(l, k)
                m = masks.setdefault((l, mixer.kind), torch.ones(A, B, mixer.n_heads, device=x.device))
                m[a, :, h] = 0
        for (l, k), m in masks.items():
            stack.enter_context(head_mask(model, l, m.view(A * B, -1), k))

    totals, base_row = repeated_forward_scores(model, encoded, by_start, len(sets), intervene, batch_size=batch_size,
                                               max_rows=max_rows, baseline=baseline)
    n = len(encoded)
    rows = [dict(heads=set_name(s), size=len(s), accuracy=t[0].item() / n, answer_logprob=t[1].item() / n,
                 margin=t[2].item() / n, n_examples=n, **base_row) for s, t in zip(sets, totals)]
    return pd.DataFrame(rows)
