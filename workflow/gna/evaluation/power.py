"""Power of the two accuracy comparisons the findings make: how many questions a test needs to see an
effect, and the smallest effect a given number of questions can see (80% power, 5% two-sided).

- Paired (two conditions on the same ``n`` questions, the findings' exact McNemar test): the normal
  approximation of McNemar's test (Connor 1987, "Sample size for testing differences in proportions
  for the paired-sample design", Biometrics 43, 207-211), conditional on nothing:
  ``n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2``, with ``d`` the difference of the two
  accuracies and ``psi`` the discordance rate (the share of questions answered right in exactly one
  condition). The exact test needs a few questions more where the discordant ones are few; the tests
  check the approximation against the exact test's power.
- Where the discordance is not known (before a run): the two conditions' answers taken as independent
  given their accuracies ``p`` and ``p - d``, ``psi = p (1 - p + d) + (p - d)(1 - p)``. An ablation's
  answers are positively correlated with the full model's (most questions come out the same), which
  makes the true discordance smaller: the assumption errs on the side of more questions.
- Unpaired (two independent samples of ``n`` questions each): the arcsine test on Cohen's
  ``h = 2 asin(sqrt(p1)) - 2 asin(sqrt(p2))``, ``n = 2 ((z_a + z_b) / h)^2`` per group (Cohen 1988, 6.3).

Effects are differences of accuracies in 0-1.
"""
from __future__ import annotations

import math

from .binomial import Z95

ALPHA = 0.05
POWER = 0.80


def _z(power: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(power))


def _z_alpha(alpha: float) -> float:
    return Z95 if alpha == ALPHA else _z(1 - alpha / 2)


def _check(name: str, value: float, low: float = 0.0, high: float = 1.0) -> None:
    if not low < value <= high:
        raise ValueError(f"{name} must lie in ({low}, {high}], got {value!r}")


def independent_discordance(base: float, effect: float) -> float:
    """The discordance of two conditions at accuracies ``base`` and ``base - effect`` whose answers are
    independent: the rate assumed where none is measured (an upper bound for positively correlated ones)."""
    other = base - effect
    if not (0 <= base <= 1 and 0 <= other <= 1):
        raise ValueError(f"accuracies must lie in [0, 1], got {base!r} and {other!r}")
    return base * (1 - other) + other * (1 - base)


def paired_n(effect: float, discordance: float | None = None, base: float | None = None,
             alpha: float = ALPHA, power: float = POWER) -> int:
    """The questions a paired test needs to detect a difference ``effect`` between two conditions:
    at the measured ``discordance``, or (None) at the independent one of :func:`independent_discordance`
    from ``base`` (the first condition's accuracy); a discordance below ``|effect|`` is impossible and
    is raised to it."""
    d = abs(effect)
    _check("an effect", d)
    if discordance is None:
        if base is None:
            raise ValueError("a paired n needs the discordance or the base accuracy (to assume independence)")
        discordance = independent_discordance(base, effect)
    psi = max(discordance, d)
    za, zb = _z_alpha(alpha), _z(power)
    return math.ceil((za * math.sqrt(psi) + zb * math.sqrt(max(psi - d * d, 0.0))) ** 2 / (d * d))


def paired_detectable(n: int, discordance: float | None = None, base: float | None = None,
                      alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest difference a paired test on ``n`` questions detects: at a fixed ``discordance``
    (raised to the effect where below it), or (None) at the independent discordance from ``base``,
    which grows with the effect. ``inf`` where no difference up to ``base`` (or 1) is detectable."""
    from scipy.optimize import brentq

    if n <= 0:
        raise ValueError(f"a detectable effect needs n > 0 questions, got {n!r}")
    if discordance is None and base is None:
        raise ValueError("a paired detectable effect needs the discordance or the base accuracy")
    za, zb = _z_alpha(alpha), _z(power)
    top = base if discordance is None else 1.0

    def gap(d: float) -> float:
        psi = independent_discordance(base, d) if discordance is None else discordance
        psi = max(psi, d)
        return math.sqrt(n) * d - za * math.sqrt(psi) - zb * math.sqrt(max(psi - d * d, 0.0))

    if top <= 0 or gap(top) < 0:
        return math.inf
    return float(brentq(gap, 1e-12, top, xtol=1e-10))


def cohen_h(p1: float, p2: float) -> float:
    """Cohen's effect size of two proportions on the arcsine scale."""
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def unpaired_n(p1: float, p2: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Questions per condition an unpaired test needs to tell accuracies ``p1`` and ``p2`` apart."""
    h = abs(cohen_h(p1, p2))
    _check("Cohen's h", h, 0.0, math.pi)
    return math.ceil(2 * ((_z_alpha(alpha) + _z(power)) / h) ** 2)


def unpaired_detectable(n: int, base: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest fall from accuracy ``base`` an unpaired test with ``n`` questions per condition
    detects (``inf`` where even a fall to 0 is not)."""
    if n <= 0:
        raise ValueError(f"a detectable effect needs n > 0 questions, got {n!r}")
    h = (_z_alpha(alpha) + _z(power)) * math.sqrt(2 / n)
    top = 2 * math.asin(math.sqrt(base))
    if h > top:
        return math.inf
    return base - math.sin((top - h) / 2) ** 2


def detectable_from_interval(low: float, high: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest effect detectable at ``power`` by a test whose 95% interval (any two-sided
    ``1 - alpha`` one) spans ``low``..``high``: ``(z_a + z_b) se``, the standard error read off the
    interval's width as ``(high - low) / (2 z_a)`` (normal approximation; for an estimate combined
    from several, e.g. a difference of two drops)."""
    za = _z_alpha(alpha)
    return (za + _z(power)) * (high - low) / (2 * za)
