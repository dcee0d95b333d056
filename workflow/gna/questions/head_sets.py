"""The KV score with sets of heads ablated together, batched as :func:`gna.scan.scan_heads` batches
single heads: per batch of prompts the residual entering every needed layer comes from one forward;
then the sets whose lowest layer is l run from layer l on, copy a of the batch with set a's heads
zeroed (one ``head_mask`` per mixer a set touches). A set of one head gives the scan's numbers.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..errors import HeadIndexError
from ..interventions import head_mask
from ..models import adapter_for
from ..scan.repeated_forwards import item_means, margins, repeated_forward_scores  # noqa: F401  margins: this module's API too
from ..probes.encoded import EncodedProbe
from ..probes.scoring import ProbeScore, score
from .names import Head, set_name  # noqa: F401  (set_name: the tables' names, imported from here too)


@dataclass
class Outcomes:
    """Per-prompt outcomes of I interventions on N prompts: ``right`` (I, N) bool, ``margin`` (I, N)
    log-prob margins; the unmodified model's ``base_right`` (N,) and ``base_margin`` (N,)."""
    right: np.ndarray
    margin: np.ndarray
    base_right: np.ndarray
    base_margin: np.ndarray


def recorder(n_items: int, encoded: EncodedProbe, baseline: ProbeScore):
    """(record, finish): ``record`` for :func:`repeated_forward_scores`; ``finish()`` -> :class:`Outcomes`."""
    n = len(encoded)
    right = torch.zeros(n_items, n, dtype=torch.bool)
    margin = torch.zeros(n_items, n, dtype=torch.float64)

    def record(chunk, examples, lp, answers):
        rows = torch.tensor(chunk)[:, None]
        right[rows, examples[None, :]] = lp.argmax(-1).eq(answers)
        margin[rows, examples[None, :]] = margins(lp, answers).double()

    def finish() -> Outcomes:
        return Outcomes(right.numpy(), margin.numpy(), baseline.correct.numpy().astype(bool),
                        margins(baseline.logprobs, encoded.answers).double().numpy())

    return record, finish


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


@torch.no_grad()
def ablate_sets(model: nn.Module, encoded: EncodedProbe, sets, batch_size: int = 32, max_rows: int = 256,
                baseline: ProbeScore | None = None, outcomes: bool = False):
    """One row per set of ``(layer, head, kind)``: ``accuracy``, ``answer_logprob``, ``margin`` (means
    over the examples) with the set ablated, the prompts whose correctness it changes
    (``discordant``), and the same three of the unablated model (``baseline_*``). ``max_rows`` bounds
    a forward's batch (sets x prompts). ``outcomes``: return ``(rows, Outcomes)``, per prompt."""
    sets = _check(model, sets)
    desc = adapter_for(model).describe()
    by_start: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(sets):
        by_start[min(l for l, _, _ in s)].append(i)

    def intervene(stack, start, chunk, x):
        A, B = len(chunk), x.shape[0] // len(chunk)
        masks: dict = {}
        for a, i in enumerate(chunk):
            for l, h, k in sets[i]:
                mixer = desc.mixer(l, k)
                m = masks.setdefault((l, mixer.kind), torch.ones(A, B, mixer.n_heads, device=x.device))
                m[a, :, h] = 0
        for (l, k), m in masks.items():
            stack.enter_context(head_mask(model, l, m.view(A * B, -1), k))

    baseline = score(model, encoded, batch_size=batch_size) if baseline is None else baseline
    record, finish = recorder(len(sets), encoded, baseline) if outcomes else (None, None)
    totals, base_row = repeated_forward_scores(model, encoded, by_start, len(sets), intervene, batch_size=batch_size,
                                               max_rows=max_rows, baseline=baseline, record=record)
    n = len(encoded)
    rows = pd.DataFrame([dict(heads=set_name(s), size=len(s), **item_means(t, n), n_examples=n, **base_row)
                         for s, t in zip(sets, totals)])
    return (rows, finish()) if outcomes else rows
