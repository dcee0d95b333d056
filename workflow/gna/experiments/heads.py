"""Head selections derived from the scan: G&A heads, top-k sets, head-keeping conditions."""
from __future__ import annotations

import random

import pandas as pd


def top_role_head(ga: pd.DataFrame, role: str) -> list | None:
    """The highest-ranked head classified as ``role`` (``gather``/``aggregate``), or None."""
    hits = ga[ga.role == role].sort_values("rank")
    if hits.empty:
        return None
    r = hits.iloc[0]
    return [int(r.layer), int(r["head"]), str(r.kind)]


def top_heads(ranking: pd.DataFrame, k: int, kinds=None) -> list[list]:
    df = ranking if kinds is None else ranking[ranking.kind.isin(kinds)]
    return [[int(r.layer), int(r.head), str(r.kind)] for r in df.sort_values("rank").head(k).itertuples()]


def random_heads(ranking: pd.DataFrame, k: int, seed: int, kinds=None) -> list[list]:
    """``k`` heads drawn uniformly (the "same budget, not ranked" control)."""
    df = ranking if kinds is None else ranking[ranking.kind.isin(kinds)]
    rows = sorted((int(r.layer), int(r.head), str(r.kind)) for r in df.itertuples())
    return [list(h) for h in random.Random(seed).sample(rows, k)]


KEEPING_CONDITIONS = ("both", "aggregate_only", "gather_only", "neither")


def head_keeping(critical: list[int], ranking: pd.DataFrame, condition: str) -> tuple[list[dict], dict]:
    """Table 1: in the two critical layers keep only their top-ranked head (or none).

    Returns the ``keep_heads`` interventions and a description of what was kept."""
    first, second = critical
    best = {}
    for layer in (first, second):
        in_layer = ranking[ranking.layer == layer].sort_values("rank")
        best[layer] = (int(in_layer.iloc[0]["head"]), str(in_layer.iloc[0].kind))
    keep_first = condition in ("both", "gather_only")
    keep_second = condition in ("both", "aggregate_only")
    specs, kept = [], {}
    for layer, keep in ((first, keep_first), (second, keep_second)):
        head, kind = best[layer]
        specs.append({"layer": layer, "heads": [head] if keep else [], "kind": kind})
        kept[f"L{layer}"] = head if keep else "none"
    return [{"keep_heads": specs}], kept
