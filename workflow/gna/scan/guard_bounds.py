"""The ``atp+exact`` guard's statistics, its cost and its reach, said before it ablates anything.

The guard draws non-candidate heads uniformly and ablates them exactly; its one-sided 95%
Clopper-Pearson bound (:func:`upper_bound`) on the share of non-candidates that beat the
``guard_k``-th candidate must reach ``guard_level``. Two things can keep it from ever meaning
anything, and both are known before the draws that cost the time:

- too few heads: with no hit among every non-candidate the bound still exceeds the level;
- too few prompts for the bar: a head's drop is beyond the probe's noise (the project's rule,
  docs/fast-scan.md: a one-sided exact McNemar test, 5% familywise over the model's heads) only
  when the ablation turns at least :func:`min_turned_wrong` prompts wrong. When the baseline is
  fewer prompts above chance than that, no candidate can be beyond noise: the guard's bar is
  noise, heads that do nothing beat it by chance, and drawing on only buys the exact scan's cost.
  After the first exact pass the bar's own test says the same for the probe actually measured.
"""
from __future__ import annotations

import math

FAMILYWISE_ALPHA = 0.05
"""A head's drop is beyond noise at p < FAMILYWISE_ALPHA / heads (exact one-sided McNemar, Bonferroni)."""


def upper_bound(hits: int, sampled: int, population: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on how many of ``population`` heads beat the bar,
    when ``hits`` of a uniform sample of ``sampled`` of them did."""
    if sampled == 0:
        return float(population)
    if hits >= sampled:
        return float(population)
    from scipy.stats import beta

    return float(beta.ppf(confidence, hits + 1, sampled - hits)) * population


def draws_to_level(hits: int, population: int, level: float) -> int | None:
    """Fewest draws, ``hits`` of them beating the bar and no other, for which the bound on the
    share is at most ``level``; None when even all ``population`` heads do not get it there."""
    def ok(n: int) -> bool:
        return upper_bound(hits, n, population) / max(1, population) <= level
    lo, hi = max(1, hits + 1), population
    if hi < lo or not ok(hi):
        return None
    while lo < hi:  # the bound falls as the draws grow: bisect
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def min_turned_wrong(n_heads: int, alpha: float = FAMILYWISE_ALPHA) -> int:
    """Fewest prompts an ablation must turn wrong, none turning right, for its drop to be beyond
    noise among ``n_heads`` heads: ``0.5 ** w < alpha / n_heads``."""
    return math.floor(math.log2(n_heads / alpha)) + 1


def mcnemar_p(drop: float, discordant: float, n: int) -> float:
    """One-sided exact McNemar p-value that an ablation lowers accuracy: of the ``discordant`` prompts
    whose correctness it changes, ``(discordant + drop * n) / 2`` turn wrong; under no effect each
    changed prompt turns either way with probability 1/2. 1.0 where the count is unknown (NaN)."""
    from scipy.stats import binom

    if math.isnan(discordant) or discordant <= 0:
        return 1.0
    worse = round((discordant + drop * n) / 2)
    return float(binom.sf(worse - 1, round(discordant), 0.5))


def forwards_per_row(layers: list[int], n_layers: int) -> float:
    """The exact rows of heads in ``layers`` (one entry per head), in forwards of one prompt row:
    a head of layer l runs layers l..L-1."""
    return sum((n_layers - layer) / n_layers for layer in layers)


def guard_plan(head_layers: list[int], n_layers: int, candidates: int, guard_sample: int, guard_k: int,
               guard_level: float | None, n_prompts: int, baseline_accuracy: float, chance: float) -> dict:
    """What the guard will cost and whether the probe can support its level, before any work.

    ``head_layers``: the layer of every head scanned. Returns ``heads_min`` and ``heads_max``
    (candidates plus the draws when none beats the bar, and at most), ``forwards_max`` (the most
    exact rows in forwards per prompt row: every head, the exact scan's cost, when a level is set)
    and ``unsupported``: one line per reason the level cannot be supported (empty when it can)."""
    n = len(head_layers)
    cand = min(candidates, n)
    rest = n - cand
    sample = min(guard_sample, rest)
    unsupported = []
    if guard_level is None:
        draws_min = draws_max = sample
    else:
        need = draws_to_level(0, rest, guard_level)
        draws_min, draws_max = max(sample, need or rest), rest
        if need is None:
            share = upper_bound(0, rest, rest) / max(1, rest)
            unsupported.append(f"with no hit among all {rest} non-candidate heads its 95% bound on their share is "
                               f"{share:.2f}, above the level {guard_level:.2f}: too few heads for that level")
        wrong = min_turned_wrong(n)
        above = (baseline_accuracy - chance) * n_prompts
        if above < wrong:
            unsupported.append(
                f"the baseline {baseline_accuracy:.3f} is {max(0.0, above):.1f} of {n_prompts} prompts above chance "
                f"({chance:.3f}), and a head's drop is beyond noise (one-sided exact McNemar, 5% familywise over "
                f"{n} heads) only when it turns at least {wrong} prompts wrong: candidate #{guard_k}, the guard's "
                f"bar, cannot be beyond noise, so heads that do nothing beat it by chance; use at least "
                f"{math.ceil(wrong / max(1e-9, baseline_accuracy - chance))} prompts")
    if unsupported:  # drawing on cannot reach the level: the guard keeps its first draws only
        draws_min = draws_max = sample
    ordered = sorted(head_layers)  # the lowest layers first: the most expensive heads to ablate
    return dict(heads=n, candidates=cand, non_candidates=rest, heads_min=cand + draws_min, heads_max=cand + draws_max,
                forwards_max=forwards_per_row(ordered[:cand + draws_max], n_layers),
                forwards_exact=forwards_per_row(ordered, n_layers), unsupported=unsupported)


def plan_line(plan: dict, guard_k: int, guard_level: float | None, rows: int) -> str:
    """The guard's cost, in one line, for the log before the scan starts."""
    head = (f"atp+exact on {plan['heads']} heads: {plan['candidates']} candidates and the guard's draws ablated "
            f"exactly, ")
    if guard_level is None or plan["unsupported"]:
        return head + (f"{plan['heads_max']} heads in all (at most {plan['forwards_max']:.1f} forwards per prompt "
                       f"row, over {rows} rows; the exact scan: {plan['forwards_exact']:.1f})")
    return head + (f"drawing until the 95% bound on the share of the other {plan['non_candidates']} heads that beat "
                   f"candidate #{guard_k} is at most {guard_level:.2f}: at least {plan['heads_min']} heads (no hit), "
                   f"at most all {plan['heads_max']} ({plan['forwards_max']:.1f} forwards per prompt row over {rows} "
                   f"rows, the exact scan's cost); the guard stops once the level is out of reach")
