"""Complementary or redundant heads: every pair of a ranking's top N ablated together, and the
smallest head set that takes KV retrieval to chance, found greedily by exact ablation.

``interaction = drop(a, b) - drop(a) - drop(b)`` (accuracy, and the log-prob margin): about 0 where
the two heads act independently, negative where they are redundant (removing both costs less than
the two costs added: each covers for the other), positive where they are complementary (removing
both costs more: the job needs both).
"""
from __future__ import annotations

import itertools

import pandas as pd
from torch import nn

from ..errors import ConfigError
from ..probes.scoring import EncodedProbe, ProbeScore
from ..scan import top_k
from .head_sets import ablate_sets, set_name

PAIR_COLUMNS = ["model", "head_a", "head_b", "rank_a", "rank_b", "drop_a", "drop_b", "drop_ab", "interaction",
                "margin_drop_a", "margin_drop_b", "margin_drop_ab", "margin_interaction", "baseline_accuracy",
                "n_examples"]


def _drops(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(drop=df.baseline_accuracy - df.accuracy, margin_drop=df.baseline_margin - df.margin)


def pair_interactions(model: nn.Module, encoded: EncodedProbe, ranking: pd.DataFrame, top: int,
                      model_name: str = "", baseline: ProbeScore | None = None, **batching) -> pd.DataFrame:
    """One row per pair of the ranking's ``top`` heads (rank order): each head's drop alone, the
    pair's, and their interaction, on accuracy and on the log-prob margin."""
    heads = top_k(ranking, min(top, len(ranking)))
    if len(heads) < 2:
        raise ConfigError(f"head_pairs.top = {top}: a pair needs at least 2 heads; the ranking has {len(ranking)}")
    pairs = list(itertools.combinations(heads, 2))
    got = _drops(ablate_sets(model, encoded, [[h] for h in heads] + [list(p) for p in pairs],
                             baseline=baseline, **batching)).set_index("heads")
    rank = {set_name([h]): i + 1 for i, h in enumerate(heads)}
    rows = []
    for a, b in pairs:
        na, nb, nab = set_name([a]), set_name([b]), set_name(sorted([a, b]))
        sa, sb, sab = got.loc[na], got.loc[nb], got.loc[nab]
        rows.append(dict(model=model_name, head_a=na, head_b=nb, rank_a=rank[na], rank_b=rank[nb],
                         drop_a=sa["drop"], drop_b=sb["drop"], drop_ab=sab["drop"],
                         interaction=sab["drop"] - sa["drop"] - sb["drop"],
                         margin_drop_a=sa.margin_drop, margin_drop_b=sb.margin_drop, margin_drop_ab=sab.margin_drop,
                         margin_interaction=sab.margin_drop - sa.margin_drop - sb.margin_drop,
                         baseline_accuracy=sab.baseline_accuracy, n_examples=int(sab.n_examples)))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def greedy_minimal_set(model: nn.Module, encoded: EncodedProbe, ranking: pd.DataFrame, candidates: int,
                       chance: float, margin: float, max_size: int, model_name: str = "",
                       baseline: ProbeScore | None = None, **batching) -> pd.DataFrame:
    """The smallest set, grown one head at a time, that takes accuracy to ``chance + margin``: each step
    adds the candidate (of the ranking's top ``candidates``) whose joint ablation with the set so far
    leaves the lowest accuracy (ties: lower margin, then higher rank); the first step takes the
    ranking's first head, the single head the scan already found lowest. Beside each step, the top-k by
    single-head rank of the same size. Rows: ``step``, ``greedy_set``, ``greedy_accuracy``,
    ``topk_set``, ``topk_accuracy`` (and margins), ``reached`` (greedy at chance), ``chance``."""
    pool = top_k(ranking, min(candidates, len(ranking)))
    order = {h: i for i, h in enumerate(pool)}
    chosen: list = []
    rows = []
    for step in range(1, min(max_size, len(pool)) + 1):
        # step 1: the ranking's first head, which the scan found lowest alone (ties: by log-prob drop)
        rest = [h for h in pool if h not in chosen] if chosen else pool[:1]
        topk = top_k(ranking, step)
        got = _drops(ablate_sets(model, encoded, [chosen + [h] for h in rest] + [topk], baseline=baseline,
                                 **batching))
        trial, ref = got.iloc[:-1].reset_index(drop=True), got.iloc[-1]
        best = min(range(len(rest)), key=lambda i: (round(trial.accuracy[i], 9), trial.margin[i], order[rest[i]]))
        chosen = chosen + [rest[best]]
        acc = float(trial.accuracy[best])
        rows.append(dict(model=model_name, step=step, added=set_name([rest[best]]),
                         greedy_set=set_name(sorted(chosen)), greedy_accuracy=acc,
                         greedy_margin=float(trial.margin[best]), topk_set=set_name(sorted(topk)),
                         topk_accuracy=float(ref.accuracy), topk_margin=float(ref.margin),
                         baseline_accuracy=float(ref.baseline_accuracy), chance=chance,
                         reached=acc <= chance + margin, chance_margin=margin, n_examples=int(ref.n_examples)))
        if acc <= chance + margin:
            break
    return pd.DataFrame(rows)
