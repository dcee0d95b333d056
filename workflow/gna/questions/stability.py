"""A ranking repeated over probe seeds: how much of it is the probe's draw.

Per head: its rank under every seed, the mean, min and max (the spread an error bar shows); per
ranking: the overlap of the top k across seeds (the share of one seed's top k in another's, mean and
min over every two seeds). Every row names the exact prompts it came from: each seed's probe file
and its sha256.
"""
from __future__ import annotations

import itertools

import pandas as pd

from ..errors import ConfigError


def rank_spread(rankings: pd.DataFrame, top_k: int) -> pd.DataFrame:
    """``rankings``: the scan's rows of one model with ``probe_seed`` (and ``probe_sha256``) columns,
    one ranking per seed. One row per head, ordered by mean rank: ``rank_s<seed>`` per seed,
    ``mean_rank``, ``min_rank``, ``max_rank``, ``rank_spread`` (max - min), ``mean_drop``,
    ``min_drop``, ``max_drop``, and the ranking's ``topk_overlap`` / ``topk_overlap_min`` at ``top_k``."""
    seeds = list(dict.fromkeys(rankings.probe_seed))
    if len(seeds) < 2:
        raise ConfigError(f"ranking_seeds.seeds: a spread needs at least 2 probe seeds, got {seeds}")
    wide = rankings.pivot_table(index=["model", "layer", "head", "kind"], columns="probe_seed",
                                values=["rank", "drop"], aggfunc="first")
    out = pd.DataFrame(index=wide.index)
    for s in seeds:
        out[f"rank_s{s}"] = wide[("rank", s)]
    ranks, drops = wide["rank"][seeds], wide["drop"][seeds]
    out["mean_rank"], out["min_rank"], out["max_rank"] = ranks.mean(axis=1), ranks.min(axis=1), ranks.max(axis=1)
    out["rank_spread"] = out.max_rank - out.min_rank
    out["mean_drop"], out["min_drop"], out["max_drop"] = drops.mean(axis=1), drops.min(axis=1), drops.max(axis=1)
    overlaps = topk_overlaps(rankings, top_k)
    out["top_k"], out["topk_overlap"], out["topk_overlap_min"] = top_k, overlaps.mean(), overlaps.min()
    out["seeds"] = "+".join(map(str, seeds))
    out["probe_sha256"] = "+".join(rankings.drop_duplicates("probe_seed").probe_sha256.str[:12])
    return out.reset_index().sort_values(["mean_rank", "layer", "kind", "head"]).reset_index(drop=True)


def topk_overlaps(rankings: pd.DataFrame, k: int) -> pd.Series:
    """|top_k(s) & top_k(t)| / k for every two seeds s < t of one model's rankings."""
    tops = {s: set(zip(*[sub.sort_values("rank").head(k)[c] for c in ("layer", "head", "kind")]))
            for s, sub in rankings.groupby("probe_seed", sort=False)}
    return pd.Series({(s, t): len(tops[s] & tops[t]) / k for s, t in itertools.combinations(tops, 2)}, dtype=float)


def stable_ranking(spread: pd.DataFrame) -> pd.DataFrame:
    """The ranking by mean rank over seeds, in the scan's columns (``rank``, ``drop`` = mean drop), so
    :func:`gna.scan.top_k` and the rules that read a ranking can use it."""
    return spread.assign(rank=range(1, len(spread) + 1), drop=spread.mean_drop)
