"""Binomial intervals on accuracies: the exact (Clopper-Pearson) two-sided interval, and Wilson's
score interval (the building block of Newcombe's intervals on differences, :mod:`.paired`).

Clopper-Pearson, not Wilson: its coverage is at least the nominal level for every n and p (Wilson's
dips below it near 0 and 1), and the fast scan's guard already uses it (gna.scan.attribution_ranking).
On a sample drawn without replacement from a finite test set, and stratified, the true variance is
at most the binomial one: the interval is conservative there.
"""
from __future__ import annotations

import math

Z95 = 1.959963984540054


def clopper_pearson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided ``confidence`` interval on a proportion seen as ``successes`` of ``n``."""
    from scipy.stats import beta

    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"a binomial interval needs 0 <= successes <= n and n > 0, got {successes} of {n}")
    alpha = 1 - confidence
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, n - successes + 1))
    high = 1.0 if successes == n else float(beta.ppf(1 - alpha / 2, successes + 1, n - successes))
    return low, high


def accuracy_interval(accuracy: float, n: int, confidence: float = 0.95) -> tuple[int, float, float]:
    """``(successes, low, high)`` of an accuracy that is a mean of 0/1 over ``n`` questions."""
    successes = round(accuracy * n)
    if abs(successes - accuracy * n) > 1e-6 * max(n, 1):
        raise ValueError(f"accuracy {accuracy!r} over {n} questions is not a count of correct answers")
    return (successes, *clopper_pearson(successes, n, confidence))


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion seen as ``successes`` of ``n`` (two-sided, at ``z``)."""
    p = successes / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)
