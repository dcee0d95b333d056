"""Classify heads as Gather or Aggregate from their token-mixing patterns on the KV probe.

Ablation says a head matters; its pattern says what it does. On each probe prompt, with
each position's mass taken over the earlier positions (its own excluded, so a head that
mostly keeps its own token, as an SSM's D term does, does not look like anything):

- **Gather score**: the share of mass that a dictionary line's value and closing tokens put
  on the key of their own line: Gather heads assemble a line's content (key with value).
- **Aggregate score**: the share of the final position's mass on the answer line's tokens
  after the key (the value and the summary token closing the line): Aggregate heads bring
  the gathered line to where the answer is produced.

Attention weights are used as they are; SSM matrices by absolute value (they are not
probabilities).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from ..errors import ProbeError
from .mixing import mixing_matrices
from ..models import adapter_for

_LINE = re.compile(r"^(?P<key>\S+?)[: ](?P<value>\d+)$")


@dataclass
class Segments:
    """Token positions of one prompt: every dictionary line's tokens and key tokens."""
    lines: list[list[int]]      # token positions of each dictionary line, closing newline included
    keys: list[list[int]]       # token positions of each line's key
    answer_line: int            # index into ``lines`` of the queried key's line
    final: int                  # position of the prompt's last token


def segment(example: dict, offsets: list[tuple[int, int]]) -> Segments:
    """Find the dictionary lines of a KV prompt (paper ``key:value`` or compact ``key value``)."""
    prompt = example["prompt"]

    def tokens_in(a: int, b: int) -> list[int]:
        return [i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a]

    lines, keys, answer, pos = [], [], None, 0
    for text in prompt.split("\n"):
        m = _LINE.match(text)
        end = pos + len(text)
        if m:
            if m["key"] == example["query"]:
                answer = len(lines)
            closing = end + 1 if end < len(prompt) else end
            lines.append(tokens_in(pos, closing))
            keys.append(tokens_in(pos, pos + len(m["key"])))
        pos = end + 1
    if not lines or answer is None:
        raise ProbeError(f"example {example.get('id')!r}: no dictionary line holds the query {example.get('query')!r}")
    return Segments(lines, keys, answer, final=max(i for i, (s, e) in enumerate(offsets) if e > s))


def pattern_scores(matrix: torch.Tensor, seg: Segments, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``matrix (H, T, T)`` of one prompt -> per-head ``(gather, aggregate)`` scores, each ``(H,)``."""
    w = (matrix if kind == "attention" else matrix.abs()).clone()
    w.diagonal(dim1=-2, dim2=-1).zero_()
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-12)
    on_key = [w[:, q, key].sum(-1) for line, key in zip(seg.lines, seg.keys) for q in line if q not in key]
    gather = torch.stack(on_key).mean(0) if on_key else torch.zeros(w.shape[0])
    answer = [q for q in seg.lines[seg.answer_line] if q not in seg.keys[seg.answer_line]]
    aggregate = w[:, seg.final, answer].sum(-1)
    return gather, aggregate


@torch.no_grad()
def classify_heads(model: nn.Module, tokenizer, examples: list[dict], heads, threshold: float = 0.3
                   ) -> pd.DataFrame:
    """Mean Gather and Aggregate scores over ``examples`` for each head of ``heads``
    (``(layer, head, kind)``), in their order, and a role: ``aggregate``, ``gather`` or ``-`` (neither score
    reaches ``threshold``; the larger one wins)."""
    if not examples:
        raise ProbeError("classify_heads: the probe set is empty")
    desc = adapter_for(model).describe()
    device = next(model.parameters()).device
    resolved = [desc.head(tuple(h)) for h in heads]
    sums: dict = {}
    for ex in examples:
        enc = tokenizer(ex["prompt"], return_offsets_mapping=True)
        seg = segment(ex, enc["offset_mapping"])
        ids = torch.tensor([enc["input_ids"]], device=device)
        for mixer in dict.fromkeys(m for m, _ in resolved):   # a set of modules would order them by address
            mats = mixing_matrices(model, mixer, ids)[0].cpu()  # (H, T, T)
            g, a = pattern_scores(mats, seg, mixer.kind)
            for m, h in resolved:
                if m is mixer:
                    acc = sums.setdefault((m.layer, h, m.kind), [0.0, 0.0])
                    acc[0] += float(g[h])
                    acc[1] += float(a[h])
    rows = []
    for layer, h, kind in dict.fromkeys((m.layer, h, m.kind) for m, h in resolved):   # the order of ``heads``
        g, a = (s / len(examples) for s in sums[(layer, h, kind)])
        role = "-" if max(g, a) < threshold else ("aggregate" if a >= g else "gather")
        rows.append(dict(layer=layer, head=h, kind=kind, gather_score=g, aggregate_score=a, role=role))
    return pd.DataFrame(rows, columns=["layer", "head", "kind", "gather_score", "aggregate_score", "role"])

