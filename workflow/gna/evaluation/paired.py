"""Two conditions scored on the same questions, compared question by question.

An accuracy is a mean of 0/1 over questions; two conditions of one model (the full model and a
layer removed, ranked and random heads removed...) answer the same questions, and most questions
come out the same in both. Only the discordant questions carry the difference: ``first_only``
(right in the first condition, wrong in the second) and ``second_only``. The tests here use them,
which an interval for two independent samples (Newcombe-Wilson, method 10 of Newcombe 1998a)
ignores: it is the wider the more the two conditions agree.

- Is there a difference: the exact McNemar test, the two-sided binomial test of ``first_only`` out
  of the discordant questions against one half (twice the smaller tail, at most 1).
- How large: the difference of the two accuracies, ``(first_only - second_only) / n``, with
  Newcombe's hybrid score interval for paired proportions (Newcombe 1998, "Improved confidence
  intervals for the difference between binomial proportions based on paired data", Stat. Med. 17,
  2635-2650, method 10): the two accuracies' Wilson intervals combined by square-and-add, corrected
  by the correlation phi of the paired answers (its numerator shrunk by n/2 towards 0 where positive,
  as the paper does).

Both take the item tables of :mod:`gna.evaluation.items` and refuse, in one line, two conditions whose
questions differ (another task, sample, limit or document).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..errors import GnaError
from .binomial import Z95, wilson
from .items import KEYS



class PairingError(GnaError, ValueError):
    """Two conditions that cannot be compared question by question."""


@dataclass(frozen=True)
class Paired:
    """Two conditions on ``n`` questions: right in both, in the first only, in the second only, in neither."""

    both: int
    first_only: int
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither

    @property
    def first_accuracy(self) -> float:
        return (self.both + self.first_only) / self.n

    @property
    def second_accuracy(self) -> float:
        return (self.both + self.second_only) / self.n

    @property
    def difference(self) -> float:
        """The first condition's accuracy minus the second's (a drop, where the second is the ablated one)."""
        return (self.first_only - self.second_only) / self.n

    @property
    def p_value(self) -> float:
        return mcnemar_exact(self.first_only, self.second_only)

    def interval(self, z: float = Z95) -> tuple[float, float]:
        return newcombe_paired(self.both, self.first_only, self.second_only, self.neither, z)


def mcnemar_exact(first_only: int, second_only: int) -> float:
    """The two-sided exact McNemar p-value of the discordant counts (1 where there are none)."""
    from scipy.stats import binom

    k, m = min(first_only, second_only), first_only + second_only
    return 1.0 if m == 0 else min(1.0, 2 * float(binom.cdf(k, m, 0.5)))


def newcombe_paired(both: int, first_only: int, second_only: int, neither: int,
                    z: float = Z95) -> tuple[float, float]:
    """Newcombe's (1998) method 10 interval on ``(first_only - second_only) / n``, the difference of the
    paired accuracies ``(both + first_only) / n`` and ``(both + second_only) / n``."""
    counts = (both, first_only, second_only, neither)
    n = sum(counts)
    if n <= 0 or min(counts) < 0:
        raise ValueError(f"a paired interval needs non-negative counts over n > 0, got {counts}")
    right1, right2 = both + first_only, both + second_only
    p1, p2 = right1 / n, right2 / n
    (l1, u1), (l2, u2) = wilson(right1, n, z), wilson(right2, n, z)
    margins = right1 * (n - right1) * right2 * (n - right2)
    cross = both * neither - first_only * second_only
    # the paper's continuity correction of phi's numerator: a positive one shrinks by n/2, not below 0
    shrunk = max(cross - n / 2, 0.0) if cross > 0 else cross
    phi = 0.0 if margins == 0 else shrunk / math.sqrt(margins)
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return low, high


def pair(first: pd.DataFrame, second: pd.DataFrame, task: str, metric: str = "acc",
         filter: str = "none") -> Paired:
    """The counts of two conditions' item tables on ``task``'s ``metric`` under ``filter``; refused
    where a table lacks it, where the questions differ (their ids or their documents), or where a
    value is not 0/1."""
    sides = []
    for name, t in (("first", first), ("second", second)):
        rows = t[(t.task == task) & (t.metric == metric) & (t["filter"] == filter)]
        if rows.empty:
            raise PairingError(f"the {name} condition has no answers for {task} {metric} ({filter})")
        if rows.duplicated(KEYS).any():
            raise PairingError(f"the {name} condition answers some question of {task} more than once: "
                               "one condition per table")
        sides.append(rows.set_index("doc_id"))
    a, b = sides
    if set(a.index) != set(b.index):
        only = sorted(set(a.index) ^ set(b.index))
        raise PairingError(f"{task}: the two conditions scored different questions ({len(a)} and {len(b)}; "
                           f"doc_id {only[:5]}{'...' if len(only) > 5 else ''} in one only): they cannot be paired")
    b = b.loc[a.index]
    differ = a.index[a["item"].astype(str).values != b["item"].astype(str).values]
    if len(differ):
        raise PairingError(f"{task}: question doc_id {list(differ[:5])} differs between the two conditions "
                           "(another document under the same index): they cannot be paired")
    x, y = a["value"].astype(float), b["value"].astype(float)
    if not (x.isin([0.0, 1.0]).all() and y.isin([0.0, 1.0]).all()):
        raise PairingError(f"{task} {metric}: per-question values are not all 0/1: not an accuracy to pair")
    return Paired(both=int(((x == 1) & (y == 1)).sum()), first_only=int(((x == 1) & (y == 0)).sum()),
                  second_only=int(((x == 0) & (y == 1)).sum()), neither=int(((x == 0) & (y == 0)).sum()))


def pooled(first: pd.DataFrame, second: pd.DataFrame, tasks, metric: str = "acc", filter: str = "none") -> Paired:
    """The counts of :func:`pair` summed over ``tasks``: several tasks' questions as one sample (each
    question once; the mean of equal-sized tasks' accuracies is then the pooled accuracy)."""
    return total([pair(first, second, task, metric, filter) for task in tasks])


def total(counts: list[Paired]) -> Paired:
    """Several tasks' counts as one sample (each question once)."""
    if not counts:
        raise PairingError("no task to pair")
    return Paired(*(sum(getattr(c, f) for c in counts) for f in ("both", "first_only", "second_only", "neither")))
