"""The nulls the open questions' verdicts are measured against, and their intervals.

- **Beyond noise** (one head, one set): the exact one-sided McNemar test of the ablated against the
  unmodified model on the same prompts (the prompts whose correctness it changes: ``discordant``),
  at 5% familywise over the heads tested (Bonferroni): the rule of ``benchmarks/atp_recall.py`` and
  of the ``atp+exact`` guard (:mod:`gna.scan.guard_bounds`, where the test itself lives).
- **Independence** (two heads, or two sets): on the above-chance scale, each ablation keeps a share
  ``r = (acc - chance) / (baseline - chance)`` of what the model retrieves beyond chance. If the two
  removed independent shares, the pair would keep ``r_a * r_b``: expected accuracy
  ``chance + (baseline - chance) r_a r_b``. The interaction is ``drop(a, b) - expected drop``:
  negative (the pair costs less than independence predicts: the two break the same prompts, as
  heads in series or parts of one mechanism do, which only path patching tells apart: overlapping),
  positive (more: one covers for the other when it is gone, as a backup does: redundant). The additive null ``drop(a) + drop(b)``
  is not used for accuracy: a floor at chance caps the pair's drop, so two large single drops force a
  negative "interaction" whatever the mechanism. On the log-prob margin (no floor) the null is additive.
- **Intervals**: percentile bootstrap over prompts (and over probe seeds, resampled first, where
  there are several), a fixed seed, so a table is deterministic.

A verdict "holds" only where its interval excludes the null (or lies beyond the threshold);
"not resolved" where it straddles.
"""
from __future__ import annotations

import numpy as np

from ..scan.guard_bounds import FAMILYWISE_ALPHA, mcnemar_p  # noqa: F401  one rule: the scan's guard uses it too

N_BOOT = 2000
"""Bootstrap resamples of every interval."""
LEVEL = 0.95
"""Two-sided coverage of every interval."""
BOOT_SEED = 0


def beyond_noise(drops, discordant, n: int, tested: int | None = None, alpha: float = FAMILYWISE_ALPHA) -> np.ndarray:
    """Per head: its accuracy drop (on ``n`` prompts, ``discordant`` of them changed) is beyond noise
    at ``alpha`` familywise over ``tested`` heads (default: as many as given)."""
    drops, discordant = np.asarray(drops, float), np.asarray(discordant, float)
    tested = tested or len(drops)
    p = np.array([mcnemar_p(d, c, n) for d, c in zip(drops, discordant)])
    return (p < alpha / tested) & (drops > 0)


def beyond_noise_outcomes(base_right: np.ndarray, right: np.ndarray, tested: int | None = None) -> np.ndarray:
    """:func:`beyond_noise` from per-prompt correctness: ``base_right`` (N,) and ``right`` (H, N)."""
    base_right, right = np.asarray(base_right, bool), np.atleast_2d(np.asarray(right, bool))
    n = base_right.shape[0]
    drops = (base_right.sum() - right.sum(1)) / n
    return beyond_noise(drops, (right != base_right).sum(1), n, tested or right.shape[0])


def above_chance_share(acc, baseline, chance):
    """The share of the above-chance accuracy an ablation keeps: ``(acc - chance) / (baseline - chance)``."""
    return (np.asarray(acc, float) - chance) / (np.asarray(baseline, float) - chance)


def independence_interaction(base, a, b, ab, chance):
    """``drop(a, b)`` minus the drop independence predicts on the above-chance scale (accuracies:
    scalars or arrays of bootstrap draws)."""
    span = np.asarray(base, float) - chance
    expected_ab = chance + span * above_chance_share(a, base, chance) * above_chance_share(b, base, chance)
    return expected_ab - np.asarray(ab, float)


def bootstrap_means(values: np.ndarray, groups=None, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> np.ndarray:
    """Bootstrap draws of the per-row means of ``values`` (R, N): prompts (columns) resampled with
    replacement; with ``groups`` (N,) (probe seeds), the groups first, then prompts within each drawn
    group. -> (n_boot, R)."""
    values = np.atleast_2d(np.asarray(values, float))
    rng = np.random.default_rng(seed)
    n = values.shape[1]
    if groups is None:
        idx = rng.integers(0, n, size=(n_boot, n))
        return values[:, idx].mean(-1).T
    groups = np.asarray(groups)
    members = [np.flatnonzero(groups == g) for g in dict.fromkeys(groups.tolist())]
    out = np.empty((n_boot, values.shape[0]))
    for i in range(n_boot):
        drawn = rng.integers(0, len(members), size=len(members))
        idx = np.concatenate([m[rng.integers(0, len(m), size=len(m))] for m in (members[j] for j in drawn)])
        out[i] = values[:, idx].mean(-1)
    return out


def interval(draws: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap ``draws`` (n_boot, ...) -> (low, high)."""
    tail = (1 - level) / 2 * 100
    return np.percentile(draws, tail, axis=0), np.percentile(draws, 100 - tail, axis=0)


def side(low: float, high: float, null: float = 0.0) -> int:
    """-1 where the interval lies below ``null``, +1 above, 0 where it straddles (or touches) it."""
    return -1 if high < null else (1 if low > null else 0)


def pair_test(base_right, right_a, right_b, right_ab, chance: float, margins=None, groups=None,
              n_boot: int = N_BOOT, seed: int = BOOT_SEED, level: float = LEVEL) -> dict:
    """The independence interaction of two ablations from per-prompt outcomes: correctness (N,) of the
    unmodified model, of a, of b and of both, and optionally the log-prob margins ``(base, a, b, ab)``
    (each (N,)). Returns the estimate and its bootstrap interval on accuracy (``interaction``,
    ``interaction_low``, ``interaction_high``), the additive accuracy interaction beside it
    (``additive_interaction``: what a floor caps), and on the margin (additive null:
    ``margin_interaction`` and its interval)."""
    acc = np.stack([np.asarray(x, float) for x in (base_right, right_a, right_b, right_ab)])
    draws = bootstrap_means(acc, groups, n_boot, seed)
    est = acc.mean(1)
    inter = lambda m: independence_interaction(m[..., 0], m[..., 1], m[..., 2], m[..., 3], chance)  # noqa: E731
    lo, hi = interval(inter(draws), level)
    drop = est[0] - est[1:]
    out = dict(interaction=float(inter(est)), interaction_low=float(lo), interaction_high=float(hi),
               expected_accuracy_ab=float(est[3] + inter(est)),
               additive_interaction=float(drop[2] - drop[0] - drop[1]), interval_level=level,
               n_examples=acc.shape[1])
    if margins is not None:
        mg = np.stack([np.asarray(x, float) for x in margins])
        md = bootstrap_means(mg, groups, n_boot, seed)
        minter = lambda m: (m[..., 0] - m[..., 3]) - (m[..., 0] - m[..., 1]) - (m[..., 0] - m[..., 2])  # noqa: E731
        mlo, mhi = interval(minter(md), level)
        out.update(margin_interaction=float(minter(mg.mean(1))), margin_interaction_low=float(mlo),
                   margin_interaction_high=float(mhi))
    return out


PAIR_WORDS = {-1: "overlapping", 1: "redundant", 0: "not resolved"}
"""A pair's reading from the side of its interval: below independence, above, or straddling it."""


def pair_reading(low: float, high: float) -> str:
    return PAIR_WORDS[side(low, high)]
