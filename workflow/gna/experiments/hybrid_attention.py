"""Section 5.3's computation: a hybrid's attention heads (the top k of the KV ranking among its attention
heads, or all) masked at the answer position (``last_row``: the official Zamba2 experiment) or ablated whole
(``ablate``), then evaluated.

One concept at two layers: this module runs a condition, :mod:`gna.report.hybrid_attention` makes its table."""
from __future__ import annotations

import logging

import pandas as pd

from .head_selection import top_heads
from .run import evaluation_rows


def condition_rows(mode: str, k: str, ranking: pd.DataFrame, *, spec: dict, tasks: list[str], fields: dict,
                   eval: dict, micro_data: str | None,
                   log: logging.Logger) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The rows and answers of one (``mode``, ``k``: a count or ``all``); refused where the ranking has no
    attention head (not a hybrid) or fewer than k."""
    attention = ranking[ranking.kind == "attention"]
    if attention.empty:
        raise ValueError(f"{fields['model']} has no attention heads in its ranking: not a hybrid")
    n = len(attention) if k == "all" else int(k)
    if n > len(attention):
        raise ValueError(f"k = {n} but {fields['model']} has {len(attention)} attention heads")
    heads = top_heads(ranking, n, kinds=["attention"])
    intervention = ({"mask_last_row": "all" if k == "all" else heads} if mode == "last_row"
                    else {"ablate_heads": heads})
    log.info("%s on %d of %d attention heads: %s", mode, len(heads), len(attention), heads)
    answers = []
    rows = evaluation_rows(spec, tasks, [intervention], eval, micro_data,
                           {**fields, "mode": mode, "k": n, "k_label": k, "attention_heads": len(attention)},
                           answers=answers)
    return rows, answers
