"""Power of the paired (McNemar) and unpaired accuracy comparisons (gna.evaluation.power)."""
import math

import pytest
from scipy.stats import binom

from gna.evaluation.power import (independent_discordance, paired_detectable, paired_n, unpaired_detectable,
                                  unpaired_n)


def exact_mcnemar_power(n: int, first_only: float, second_only: float, alpha: float = 0.05) -> float:
    """The exact McNemar test's power by enumeration: m discordant questions ~ Binomial(n, psi), of
    which k first-only ~ Binomial(m, first_only / psi); rejected where twice the smaller tail < alpha."""
    psi = first_only + second_only
    share = first_only / psi
    total = 0.0
    for m in range(1, n + 1):
        pm = binom.pmf(m, n, psi)
        if pm < 1e-15:
            continue
        ks = [k for k in range(m + 1) if min(1.0, 2 * binom.cdf(min(k, m - k), m, 0.5)) < alpha]
        total += pm * sum(binom.pmf(k, m, share) for k in ks)
    return total


@pytest.mark.parametrize("effect,discordance", [(0.10, 0.20), (0.15, 0.30), (0.06, 0.10)])
def test_paired_n_reaches_80_percent_power_on_the_exact_test(effect, discordance):
    n = paired_n(effect, discordance)
    first_only = (discordance + effect) / 2
    power = exact_mcnemar_power(n, first_only, discordance - first_only)
    assert 0.75 <= power <= 0.86, (n, power)
    # a third fewer questions lose it
    assert exact_mcnemar_power(int(n * 2 / 3), first_only, discordance - first_only) < 0.75


def test_paired_n_closed_form():
    # Connor (1987): n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2; d = 0.1, psi = 0.2
    za, zb = 1.959963984540054, 0.8416212335729143
    assert paired_n(0.1, 0.2) == math.ceil((za * math.sqrt(0.2) + zb * math.sqrt(0.19)) ** 2 / 0.01) == 155


def test_paired_detectable_inverts_paired_n():
    for d, psi in ((0.1, 0.2), (0.05, 0.3), (0.2, 0.4)):
        n = paired_n(d, psi)
        assert paired_detectable(n, psi) <= d < paired_detectable(n - 1, psi)
    base = 0.6
    n = paired_n(0.12, base=base)
    assert paired_detectable(n, base=base) <= 0.12 < paired_detectable(n - 1, base=base)


def test_unknown_discordance_assumes_independence_and_needs_more():
    assert independent_discordance(0.5, 0.1) == pytest.approx(0.5 * 0.6 + 0.4 * 0.5)
    assert paired_n(0.1, base=0.5) == paired_n(0.1, independent_discordance(0.5, 0.1))
    assert paired_n(0.1, base=0.5) > paired_n(0.1, 0.15)
    # a discordance below the effect is impossible: raised to it
    assert paired_n(0.1, 0.01) == paired_n(0.1, 0.1)


def test_nothing_detectable_on_few_questions():
    assert paired_detectable(3, base=0.5) == math.inf
    assert unpaired_detectable(2, 0.3) == math.inf


@pytest.mark.parametrize("h,n", [(0.2, 392), (0.5, 63), (0.8, 25)])
def test_unpaired_n_matches_cohens_table(h, n):
    # Cohen (1988) Table 6.4.1: n per sample for h at power .80, a2 = .05, rounded to the nearest
    # (392.4 for h = .2); ours is rounded up
    p2 = 0.5
    p1 = math.sin(math.asin(math.sqrt(p2)) + h / 2) ** 2
    assert unpaired_n(p1, p2) - n in (0, 1)


def test_unpaired_detectable_inverts_unpaired_n():
    d = unpaired_detectable(392, 0.6)
    assert unpaired_n(0.6, 0.6 - d) in (392, 393)
    assert 0.09 < d < 0.11


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match="effect"):
        paired_n(0.0, 0.2)
    with pytest.raises(ValueError, match="discordance or the base"):
        paired_n(0.1)
    with pytest.raises(ValueError, match="n > 0"):
        paired_detectable(0, 0.2)
