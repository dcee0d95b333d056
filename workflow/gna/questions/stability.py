"""A ranking repeated over probe seeds: how much of it is the probe's draw.

Per head: its rank under every seed, the mean, min and max (the spread an error bar shows); per
ranking: the overlap of the top k across seeds (the share of one seed's top k in another's, mean and
min over every two seeds); and, from every prompt's outcome under every seed, rank intervals over
prompts and probe seeds (:func:`rank_intervals`): a top k is stable only where its heads' drops are
beyond noise and their intervals do not reach past k. Every row names the exact prompts it came from: each seed's probe file
and its sha256.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .null import N_BOOT, beyond_noise_outcomes, bootstrap_means, interval


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


def rank_intervals(heads: list, per_seed: dict, top_k: int, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Rank intervals over prompts and probe seeds. ``per_seed``: {seed: :class:`Outcomes` of ``heads``
    each ablated alone on that seed's probe}. Every prompt of every seed pooled: a head's ``pooled_drop``
    (accuracy) and ``pooled_margin_drop``, its rank by them (accuracy first, then margin, as the scan
    ranks), ``beyond_noise`` (exact McNemar on the pooled prompts, 5% familywise over ``heads``), and a
    percentile interval of its rank (``rank_low``, ``rank_high``) over a bootstrap that draws seeds,
    then prompts within each. ``stable_k``: the top-k read, ``min(top_k, heads beyond noise)``;
    ``stable``: the top ``stable_k`` heads' intervals all within 1..stable_k and every other head's
    above it (``not resolved`` where one straddles)."""
    seeds = list(per_seed)
    base = np.concatenate([per_seed[s].base_right for s in seeds]).astype(float)
    right = np.concatenate([per_seed[s].right for s in seeds], axis=1).astype(float)       # (H, N)
    bmargin = np.concatenate([per_seed[s].base_margin for s in seeds])
    margin = np.concatenate([per_seed[s].margin for s in seeds], axis=1)
    groups = np.concatenate([np.full(len(per_seed[s].base_right), i) for i, s in enumerate(seeds)])
    acc_drop, margin_drop = base[None] - right, bmargin[None] - margin
    H = len(heads)
    draws = bootstrap_means(np.concatenate([acc_drop, margin_drop]), groups, n_boot)    # (n_boot, 2H)
    ranks = np.empty((n_boot, H))
    for i, d in enumerate(draws):
        order = np.lexsort((-d[H:], -d[:H]))
        ranks[i, order] = np.arange(1, H + 1)
    low, high = interval(ranks)
    est_acc, est_margin = acc_drop.mean(1), margin_drop.mean(1)
    rank = np.empty(H, int)
    rank[np.lexsort((-est_margin, -est_acc))] = np.arange(1, H + 1)
    noise = beyond_noise_outcomes(base.astype(bool), right.astype(bool), tested=H)
    k = int(min(top_k, noise.sum()))
    top = rank <= k
    stable = bool(k) and bool((high[top] <= k).all() and (low[~top] > k).all())
    out = pd.DataFrame(dict(layer=[h[0] for h in heads], head=[h[1] for h in heads], kind=[h[2] for h in heads],
                            pooled_rank=rank, rank_low=low, rank_high=high, pooled_drop=est_acc,
                            pooled_margin_drop=est_margin, beyond_noise=noise))
    return out.assign(stable_k=k, stable=stable, n_prompts=len(base), n_seeds=len(seeds)).sort_values("pooled_rank")


def seed_rankings(ranking_paths: list[str], probe_paths: list[str], *, spec: dict, seeds: list[int], top_k: int,
                  batch_size: int, max_rows: int, log) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rule ranking_seeds: each head's rank spread over the seeds' rankings (``ranking_paths``, the probes
    they were made on ``probe_paths``, one per seed of ``seeds``), with its rank interval over prompts and
    seeds (every ranked head ablated alone again on every seed's prompts); and the stable ranking."""
    from ..io import sha256_file
    from ..models import describe, load_model
    from ..probes.kv import read_jsonl
    from ..probes.scoring import encode
    from .head_sets import ablate_sets

    # the scan's own ranking carries no hash column: every seed's is taken from its probe file here
    rankings = pd.concat([pd.read_csv(r).assign(probe_seed=s, probe=str(pr), probe_sha256=sha256_file(pr))
                          for r, s, pr in zip(ranking_paths, seeds, probe_paths)], ignore_index=True)
    spread = rank_spread(rankings, top_k)
    model, tok = load_model(spec)
    heads = [h for h in describe(model).heads() if h in set(zip(rankings.layer, rankings["head"], rankings.kind))]
    per_seed = {s: ablate_sets(model, encode(read_jsonl(pr), tok), [[h] for h in heads], outcomes=True,
                               batch_size=batch_size, max_rows=max_rows)[1] for s, pr in zip(seeds, probe_paths)}
    spread = spread.merge(rank_intervals(heads, per_seed, top_k), on=["layer", "head", "kind"],
                          how="left").sort_values("pooled_rank")
    log.info("top-%d overlap over seeds %s: %.2f (min %.2f); %d heads beyond noise, stable %s\n%s", top_k, seeds,
             spread.topk_overlap.iloc[0], spread.topk_overlap_min.iloc[0], int(spread.stable_k.iloc[0]),
             bool(spread.stable.iloc[0]), spread.head(10).to_string())
    return spread, stable_ranking(spread.sort_values(["mean_rank", "layer", "kind", "head"]).reset_index(drop=True))
