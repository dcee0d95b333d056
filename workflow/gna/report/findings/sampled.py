"""Findings on a sampled benchmark (the local MMLU's ``benchmarks.mmlu.size`` questions): every
accuracy with its n and 95% interval, a drop judged against its interval, and the paper's
Llama-3.1-8B beside the real models.

A drop between two evaluations of the same questions (:func:`drop`) is judged paired where both
evaluations kept their answers (the jobs' ``*.answers.csv``): beyond noise where the exact McNemar
test on the questions that changed says so (p < 0.05, a fall), its size with Newcombe's paired
interval (:mod:`gna.evaluation.paired`). An older result without answers falls back to the
Newcombe-Wilson interval of two independent proportions, and says "unpaired": for paired answers
that interval is conservative (wider than the paired one), so "beyond the interval" holds a fortiori.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...evaluation.binomial import clopper_pearson, wilson
from ...evaluation.paired import Paired, pair

ALPHA = 0.05

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


@dataclass(frozen=True)
class Drop:
    """``before - after`` with its 95% interval; ``paired``: the counts behind it, None where unpaired."""

    drop: float
    low: float
    high: float
    paired: Paired | None = None

    @property
    def beyond(self) -> bool:
        """A fall beyond noise: McNemar's p under ALPHA where paired, else the interval above 0."""
        if self.paired is None:
            return self.low > 0
        return self.drop > 0 and self.paired.p_value < ALPHA

    @property
    def text(self) -> str:
        shown = f"drop {self.drop:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"
        if self.paired is None:
            return shown + " unpaired"
        p = self.paired
        return (shown + f" paired ({p.first_only} answers lost, {p.second_only} gained; McNemar p "
                f"{p.p_value:.2g})")


def read_answers(template: str | None, **keys) -> pd.DataFrame | None:
    """A job's per-question answers, ``template`` formatted with ``keys``; None without a template
    or where that job kept none (an older result)."""
    if template is None:
        return None
    path = Path(template.format(**keys))
    return pd.read_csv(path, dtype={"item": str, "target": str}) if path.is_file() else None


def drop(before: float, after: float, n: int, answers: tuple | None = None) -> Drop:
    """The drop from ``before`` to ``after`` (two accuracies over ``n`` questions each, as the tables
    print them). ``answers``: ``(before's answers, after's answers, tasks)``, the two tables of
    :mod:`gna.evaluation.items` (either may be None: unpaired) and the tasks whose mean accuracy the
    values are (their ``acc``, pooled; tasks of equal size, so that pooling is that mean)."""
    first, second, tasks = answers if answers is not None else (None, None, ())
    if first is None or second is None:
        return Drop(*drop_interval(before, after, n))
    counts = [pair(first, second, task) for task in tasks]
    p = Paired(*(sum(getattr(c, f) for c in counts) for f in ("both", "first_only", "second_only", "neither")))
    for value, right in ((before, p.both + p.first_only), (after, p.both + p.second_only)):
        if count(value, p.n) != right:
            raise ValueError(f"the answers of {', '.join(tasks)} ({right} of {p.n} right) are not the table's "
                             f"accuracy {value!r}: results and answers of different runs")
    return Drop(p.difference, *p.interval(), paired=p)


def resolved(verdict: str, beyond: bool) -> str:
    """A ``holds`` that the interval does not carry (its drop within noise) becomes ``not resolved``."""
    return "not resolved" if verdict == "holds" and not beyond else verdict
