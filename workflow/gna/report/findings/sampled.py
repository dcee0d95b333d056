"""Findings on a sampled benchmark (the local MMLU's ``benchmarks.mmlu.size`` questions): every
accuracy with its n and 95% interval, a drop judged against its interval, and the paper's
Llama-3.1-8B beside the real models.

A drop between two evaluations of the same questions is judged by the Newcombe-Wilson interval of
a difference of two proportions, which treats them as independent samples: for paired answers it
is conservative (wider than the paired interval), so "beyond the interval" here holds a fortiori.
"""
from __future__ import annotations

import math

from ...evaluation.binomial import clopper_pearson, wilson

# The paper's Llama-3.1-8B-Instruct (full MMLU, 14,042 questions; bf16), for the real models beside it:
# Figs. 2-3 as the paper states them (docs/reproduction-notes.md), Table 1 from data/published.
PAPER_LLAMA_8B = {
    "gradual": "Llama-3.1-8B (paper): MMLU holds down to the minimal model of 18 of 32 layers and falls to "
               "chance when layer 17 is cut; knowledge falls smoothly",
    "individual": "Llama-3.1-8B (paper): L16 and L17 critical in the 18-layer minimal model (MMLU to chance, "
                  "knowledge kept)",
    "head_keeping": "Llama-3.1-8B (paper, L16H22 + L17H24): MMLU both 66.3, gather only 25.6, aggregate only "
                    "24.4, neither 25.6; knowledge 39.1-39.2",
}


def count(accuracy: float, n: int) -> int:
    """The correct answers behind an accuracy over ``n`` questions, as a table prints it (rounded to
    its significant digits: within 0.05 of a count)."""
    k = round(accuracy * n)
    if abs(k - accuracy * n) > 0.05 or not 0 <= k <= n:
        raise ValueError(f"accuracy {accuracy!r} over {n} questions is not a count of correct answers")
    return k


def drop_interval(before: float, after: float, n: int) -> tuple[float, float, float]:
    """(drop, low, high): ``before - after``, two accuracies over ``n`` questions each, with the
    Newcombe-Wilson 95% interval of the difference."""
    a, b = count(before, n), count(after, n)
    (la, ua), (lb, ub) = wilson(a, n), wilson(b, n)
    pa, pb = a / n, b / n
    d = pa - pb
    return d, d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2), d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)


def acc(value: float, n: int | None) -> str:
    """An accuracy as the findings print it: with n its count and 95% interval."""
    if not n:
        return f"{value:.2f}"
    k = count(value, n)
    low, high = clopper_pearson(k, n)
    return f"{value:.2f} ({k}/{n}, {low:.2f}-{high:.2f})"


def drop_text(before: float, after: float, n: int) -> str:
    d, low, high = drop_interval(before, after, n)
    return f"drop {d:+.2f} [{low:+.2f}, {high:+.2f}]"


def resolved(verdict: str, beyond: bool) -> str:
    """A ``holds`` that the interval does not carry (its drop within noise) becomes ``not resolved``."""
    return "not resolved" if verdict == "holds" and not beyond else verdict
