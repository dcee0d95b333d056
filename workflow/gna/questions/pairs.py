"""Complementary or redundant heads: every pair of a ranking's top N ablated together, against
independence (:mod:`.null`), and the smallest head sets that take KV retrieval to chance, found by
an exhaustive search over a candidate pool.

A pair's ``interaction`` is ``drop(a, b)`` minus the drop independence predicts on the above-chance
scale, with a bootstrap interval over prompts (familywise over the pairs: Bonferroni): below 0 beyond the interval, the pair costs less than
independent heads would: the two break the same prompts (overlapping: in series, or one mechanism;
path patching, :mod:`.paths`, tells which); above, more: one covers for the other (redundant, a
backup); straddling 0, not resolved. ``additive_interaction`` (``drop(a, b) - drop(a) -
drop(b)``) is kept beside it: a floor at chance caps it, so it is no test. On the log-prob margin the
null is additive (no floor), with its own interval.
"""
from __future__ import annotations

import itertools
import math

import pandas as pd
from torch import nn

from ..errors import ConfigError
from ..probes.encoded import EncodedProbe
from ..probes.scoring import ProbeScore, score
from ..scan import top_k
from .head_sets import ablate_sets, set_name
from .null import LEVEL, beyond_noise, bootstrap_means, interval, pair_reading, pair_test

PAIR_COLUMNS = ["model", "head_a", "head_b", "rank_a", "rank_b", "drop_a", "drop_b", "drop_ab", "interaction",
                "interaction_low", "interaction_high", "reading", "expected_accuracy_ab", "additive_interaction",
                "margin_drop_a", "margin_drop_b", "margin_drop_ab", "margin_interaction", "margin_interaction_low",
                "margin_interaction_high", "baseline_accuracy", "chance", "interval_level", "n_examples"]
MAX_SETS = 20000
"""The exhaustive search stops before a size whose sets of the pool outnumber this (said in its rows)."""


def _drops(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(drop=df.baseline_accuracy - df.accuracy, margin_drop=df.baseline_margin - df.margin)


def pair_interactions(model: nn.Module, encoded: EncodedProbe, ranking: pd.DataFrame, top: int,
                      model_name: str = "", baseline: ProbeScore | None = None, **batching) -> pd.DataFrame:
    """One row per pair of the ranking's ``top`` heads (rank order): each head's drop alone, the
    pair's, the interaction against independence with its bootstrap interval over prompts and its
    reading (``overlapping``, ``redundant``, ``not resolved``), on accuracy; the
    additive interaction on the log-prob margin with its interval."""
    heads = top_k(ranking, min(top, len(ranking)))
    if len(heads) < 2:
        raise ConfigError(f"head_pairs.top = {top}: a pair needs at least 2 heads; the ranking has {len(ranking)}")
    pairs = list(itertools.combinations(heads, 2))
    sets = [[h] for h in heads] + [list(p) for p in pairs]
    got, out = ablate_sets(model, encoded, sets, baseline=baseline, outcomes=True, **batching)
    got = _drops(got)
    at = {name: i for i, name in enumerate(got.heads)}
    rank = {set_name([h]): i + 1 for i, h in enumerate(heads)}
    chance = 1 / encoded.n_choices
    level = 1 - (1 - LEVEL) / len(pairs)   # familywise over the pairs (Bonferroni)
    rows = []
    for a, b in pairs:
        na, nb, nab = set_name([a]), set_name([b]), set_name(sorted([a, b]))
        ia, ib, iab = at[na], at[nb], at[nab]
        test = pair_test(out.base_right, out.right[ia], out.right[ib], out.right[iab], chance,
                         margins=(out.base_margin, out.margin[ia], out.margin[ib], out.margin[iab]), level=level)
        sa, sb, sab = got.iloc[ia], got.iloc[ib], got.iloc[iab]
        rows.append(dict(model=model_name, head_a=na, head_b=nb, rank_a=rank[na], rank_b=rank[nb],
                         drop_a=sa["drop"], drop_b=sb["drop"], drop_ab=sab["drop"],
                         reading=pair_reading(test["interaction_low"], test["interaction_high"]),
                         margin_drop_a=sa.margin_drop, margin_drop_b=sb.margin_drop, margin_drop_ab=sab.margin_drop,
                         baseline_accuracy=sab.baseline_accuracy, chance=chance, **test))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def candidate_pool(model: nn.Module, encoded: EncodedProbe, ranking: pd.DataFrame, candidates,
                   baseline: ProbeScore, **batching) -> tuple[list, str]:
    """The heads the minimal-set search combines: ``"beyond_noise"``, every head of the ranking whose
    single drop is beyond noise on this probe (exact McNemar, 5% familywise over the ranking's heads;
    only heads with a positive drop in the ranking are re-ablated: no other can pass), or an integer N,
    the ranking's top N. -> (heads in rank order, the rule in words)."""
    if candidates != "beyond_noise":
        n = int(candidates)
        return top_k(ranking, min(n, len(ranking))), f"the ranking's top {n}"
    ranked = ranking.sort_values("rank")
    maybe = ranked[ranked["drop"] > 0] if "drop" in ranked else ranked
    heads = [(int(r.layer), int(r.head), str(r.kind)) for r in maybe.itertuples()]
    if not heads:
        return [], f"beyond noise (none of {len(ranking)} heads)"
    got = ablate_sets(model, encoded, [[h] for h in heads], baseline=baseline, **batching)
    ok = beyond_noise(got.baseline_accuracy - got.accuracy, got.discordant, len(encoded), tested=len(ranking))
    return [h for h, k in zip(heads, ok) if k], f"beyond noise ({int(ok.sum())} of {len(ranking)} heads)"


def minimal_sets(model: nn.Module, encoded: EncodedProbe, ranking: pd.DataFrame, pool: list, chance: float,
                 margin: float, max_size: int, model_name: str = "", pool_rule: str = "",
                 baseline: ProbeScore | None = None, max_sets: int = MAX_SETS, **batching) -> pd.DataFrame:
    """The smallest sets of ``pool``'s heads that take KV accuracy to ``chance + margin``, by exhaustive
    search: every set of size 1, 2, ... (up to ``max_size``) ablated, stopping at the first size where
    any reaches the line. One row per size searched: the sets tried, how many reach the line (the
    ties), the best (lowest accuracy, then margin, then rank order) with a bootstrap interval over
    prompts of its accuracy, every tying set at the last size, and the top-k by single-head rank of
    the same size beside it (with its interval). ``reached``: a set at the line."""
    baseline = score(model, encoded, batch_size=batching.get("batch_size", 32)) if baseline is None else baseline
    line = chance + margin
    order = {h: i for i, h in enumerate(pool)}
    rows = []
    for size in range(1, min(max_size, len(pool)) + 1):
        n_sets = math.comb(len(pool), size)
        if n_sets > max_sets:
            rows.append(dict(model=model_name, size=size, sets_tried=0, note=f"{n_sets} sets of {size} of the pool's "
                             f"{len(pool)} heads: over {max_sets}, not searched", reached=False))
            break
        combos = [list(c) for c in itertools.combinations(pool, size)]
        topk = sorted(top_k(ranking, size))
        got, out = ablate_sets(model, encoded, combos + [topk], baseline=baseline, outcomes=True, **batching)
        trial = got.iloc[:-1]
        draws = bootstrap_means(out.right.astype(float))
        low, high = interval(draws)
        best = min(range(len(combos)), key=lambda i: (round(trial.accuracy.iloc[i], 9), trial.margin.iloc[i],
                                                      [order[h] for h in combos[i]]))
        ties = [i for i in range(len(combos)) if trial.accuracy.iloc[i] <= line + 1e-12]
        ref = got.iloc[-1]
        rows.append(dict(model=model_name, size=size, sets_tried=len(combos), n_reaching=len(ties),
                         best_set=set_name(sorted(combos[best])), best_accuracy=float(trial.accuracy.iloc[best]),
                         best_low=float(low[best]), best_high=float(high[best]),
                         best_margin=float(trial.margin.iloc[best]),
                         tying_sets=" ".join(set_name(sorted(combos[i])) for i in ties),
                         topk_set=set_name(topk), topk_accuracy=float(ref.accuracy), topk_low=float(low[-1]),
                         topk_high=float(high[-1]), baseline_accuracy=float(ref.baseline_accuracy), chance=chance,
                         chance_margin=margin, reached=bool(ties), pool=set_name(pool), pool_rule=pool_rule,
                         n_examples=int(ref.n_examples), note=""))
        if ties:
            break
    if not rows:
        rows.append(dict(model=model_name, size=0, sets_tried=0, reached=False, pool=set_name(pool),
                         pool_rule=pool_rule, note="the candidate pool is empty"))
    return pd.DataFrame(rows)



def study_tables(probe_path: str, ranking: pd.DataFrame, *, spec: dict, top: int, candidates: int,
                 chance_margin: float, max_size: int, n_examples: int | None, batch_size: int, max_rows: int,
                 model_name: str, log) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rule head_pairs: the pairs of the ranking's ``top`` heads (:func:`pair_interactions`) and the smallest
    head sets that take retrieval to chance over the candidate pool (:func:`minimal_sets`), on the probe's
    first ``n_examples`` prompts (all where None)."""
    from ..models import load_model
    from ..probes.kv import read_jsonl
    from ..probes.scoring import encode

    model, tok = load_model(spec)
    examples = read_jsonl(probe_path)
    encoded = encode(examples[:n_examples or len(examples)], tok)
    batching = dict(batch_size=batch_size, max_rows=max_rows)
    baseline = score(model, encoded, batch_size=batch_size)
    pairs = pair_interactions(model, encoded, ranking, top, model_name=model_name, baseline=baseline, **batching)
    log.info("pairs of the top %d heads:\n%s", top, pairs.to_string())
    pool, rule = candidate_pool(model, encoded, ranking, candidates, baseline, **batching)
    log.info("candidate pool, %s: %s", rule, pool)
    minimal = minimal_sets(model, encoded, ranking, pool, chance=1 / encoded.n_choices, margin=chance_margin,
                           max_size=max_size, model_name=model_name, pool_rule=rule, baseline=baseline, **batching)
    log.info("smallest sets:\n%s", minimal.to_string())
    return pairs, minimal
