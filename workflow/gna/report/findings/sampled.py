"""Findings on a sampled benchmark (the local MMLU's ``benchmarks.mmlu.size`` questions): every
accuracy with its n and 95% interval, a drop judged against its interval, and the paper's
Llama-3.1-8B beside the real models. Shared by every findings section that judges a sampled task.

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

from ...evaluation.binomial import Z95, clopper_pearson, wilson
from ...evaluation.paired import Paired, pair
from ...evaluation.power import paired_detectable, unpaired_detectable
from ..verdict import Part
from .paper import effect

ALPHA = 0.05


def _paper_llama_8b() -> dict[str, str]:
    """The paper's Llama-3.1-8B-Instruct (full MMLU, 14,042 questions; bf16), for the real models
    beside it: Figs. 2-3 as the paper states them, Table 1's numbers from the paper effects' table."""
    t1 = {c: effect(f"table1_{c}") for c in ("gather_only", "aggregate_only", "neither")}
    kn = effect("table1_knowledge")
    return {
        "gradual": f"Llama-3.1-8B (paper): MMLU holds down to the minimal model of 18 of 32 layers and falls to "
                   f"chance when layer 17 is cut ({effect('fig2_collapse').before:.1f} -> chance); knowledge falls "
                   "smoothly",
        "individual": "Llama-3.1-8B (paper): L16 and L17 critical in the 18-layer minimal model (MMLU to chance, "
                      "knowledge kept)",
        "head_keeping": f"Llama-3.1-8B (paper, L16H22 + L17H24): MMLU both {effect('table1_both').after:.1f}, "
                        + ", ".join(f"{c.replace('_', ' ')} {e.after:.1f}" for c, e in t1.items())
                        + f"; knowledge {min(kn.before, kn.after):.1f}-{max(kn.before, kn.after):.1f}",
    }


PAPER_LLAMA_8B = _paper_llama_8b()


def task_sizes(tasks: dict, kv_prompts: int | None = None) -> dict[str, int]:
    """The questions of each role of a study whose tasks are local files (``tasks["micro_data"]``, one
    json line a question): ``mmlu``, ``knowledge`` (its tasks pooled), each retrieval task by its role,
    ``arc_challenge`` and ``arc_challenge_chat``; ``kv``, the prompts of a probe set."""
    folder = Path(tasks["micro_data"])

    def lines(task: str) -> int:
        with open(folder / f"{task}.jsonl") as f:
            return sum(1 for line in f if line.strip())

    sizes = {"mmlu": lines(tasks["mmlu"]), "knowledge": sum(lines(t) for t in tasks["knowledge"])}
    sizes |= {role: lines(task) for role, task in (tasks.get("retrieval") or {}).items()}
    # tasks.arc_<kind>: the ARC-C tables' column of that kind
    arc = {"regular": "arc_challenge", "chat": "arc_challenge_chat"}
    sizes |= {role: lines(tasks[f"arc_{kind}"]) for kind, role in arc.items() if tasks.get(f"arc_{kind}")}
    return sizes | ({"kv": int(kv_prompts)} if kv_prompts else {})


def local_sizes(tasks: dict, docs: dict[str, int]) -> dict[str, int]:
    """The questions of each role of a study whose tasks are local samples of known size (``docs``: task
    -> its documents, :func:`gna.plan.jobs.local_task_docs`): ``mmlu``, ``knowledge`` (its tasks pooled:
    the role's accuracy is their mean, a count over their sum where the tasks are of equal size, as the
    real preset's) and each retrieval role; a role with a task of unknown size is left out."""
    roles = {"mmlu": tasks.get("mmlu"), "knowledge": tasks.get("knowledge"), **(tasks.get("retrieval") or {})}
    out = {}
    for role, names in roles.items():
        names = [names] if isinstance(names, str) else list(names or ())
        if names and all(t in docs for t in names):
            out[role] = sum(docs[t] for t in names)
    return out


def n_of(settings: dict, role: str) -> int | None:
    """The questions behind a role's accuracies: ``settings["task_n"][role]`` (each role its own:
    the micro study), else ``mmlu_n`` (one sample size for every task: the real study's), else None."""
    return (settings.get("task_n") or {}).get(role) or settings.get("mmlu_n")


def count(accuracy: float, n: int) -> int:
    """The correct answers behind an accuracy over ``n`` questions, as a table prints it (rounded to
    its significant digits: within 0.05 of a count)."""
    k = round(accuracy * n)
    if abs(k - accuracy * n) > 0.05 or not 0 <= k <= n:
        raise ValueError(f"accuracy {accuracy!r} over {n} questions is not a count of correct answers")
    return k


def drop_interval(before: float, after: float, n: int, n_after: int | None = None,
                  z: float = Z95) -> tuple[float, float, float]:
    """(drop, low, high): ``before - after``, two accuracies over ``n`` questions (``after`` over
    ``n_after`` where given), with the Newcombe-Wilson interval of the difference (95%, or at ``z``)."""
    m = n_after or n
    a, b = count(before, n), count(after, m)
    (la, ua), (lb, ub) = wilson(a, n, z), wilson(b, m, z)
    pa, pb = a / n, b / m
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
    alpha: float = ALPHA

    @property
    def beyond(self) -> bool:
        """A fall beyond noise: McNemar's p under ``alpha`` where paired, else the interval above 0."""
        if self.paired is None:
            return self.low > 0
        return self.drop > 0 and self.paired.p_value < self.alpha

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


def drop(before: float, after: float, n: int, answers: tuple | None = None, z: float = Z95,
         m: int = 1) -> Drop:
    """The drop from ``before`` to ``after`` (two accuracies over ``n`` questions each, as the tables
    print them). ``answers``: ``(before's answers, after's answers, tasks)``, the two tables of
    :mod:`gna.evaluation.items` (either may be None: unpaired) and the tasks whose mean accuracy the
    values are (their ``acc``, pooled; tasks of equal size, so that pooling is that mean). A task may
    be ``(task, metric)``: a score other than ``acc`` (the hybrids' KV-Ret, ``top1``). ``m``: the
    candidates ``after`` was picked among as their extreme: interval and test at Bonferroni's level
    (:func:`level_z`), which overrides ``z``."""
    first, second, tasks = answers if answers is not None else (None, None, ())
    alpha = ALPHA / max(m, 1)
    if m > 1:
        z = level_z(m)
    if first is None or second is None:
        return Drop(*drop_interval(before, after, n, z=z), alpha=alpha)
    counts = [pair(first, second, *((task,) if isinstance(task, str) else task)) for task in tasks]
    p = Paired(*(sum(getattr(c, f) for c in counts) for f in ("both", "first_only", "second_only", "neither")))
    for value, right in ((before, p.both + p.first_only), (after, p.both + p.second_only)):
        if count(value, p.n) != right:
            raise ValueError(f"the answers of {', '.join(map(str, tasks))} ({right} of {p.n} right) are not the table's "
                             f"accuracy {value!r}: results and answers of different runs")
    return Drop(p.difference, *p.interval(z), paired=p, alpha=alpha)


def resolved(verdict: str, beyond: bool) -> str:
    """A ``holds`` that the interval does not carry (its drop within noise) becomes ``not resolved``."""
    return "not resolved" if verdict == "holds" and not beyond else verdict


def level_z(m: int = 1, alpha: float = ALPHA) -> float:
    """The normal quantile of a two-sided interval at ``1 - alpha / m``: Bonferroni's for a condition
    picked as the extreme of ``m`` candidates (the level at which the family's Holm test rejects its
    most extreme member), 1.96 for one."""
    if m <= 1:
        return Z95
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / m / 2))


def picked(m: int, alpha: float = ALPHA) -> str:
    """How a part picked as the extreme of ``m`` candidates says its interval's level."""
    return f"{100 * (1 - alpha / m):.{1 if m < 20 else 2}f}% interval: the extreme of {m}, Bonferroni-adjusted"


UNPAIRED = "no per-item answers kept for both conditions"


def part(name: str, first: float, second: float, n: int, line: float, paper: float | None = None,
         above: bool = True, answers: tuple | None = None, n_second: int | None = None,
         m: int = 1, soi: float | None = None, why_unpaired: str = UNPAIRED) -> Part:
    """The part of a claim that ``first - second`` (two accuracies in 0-1 over ``n`` and ``n_second``
    questions; a drop: before, after; a gain: after, before) is beyond ``line``, with its interval
    (:func:`drop`: paired where ``answers`` are; at Bonferroni's level for the extreme of ``m``
    candidates, :func:`level_z`) and the smallest difference the test detects at 80% power at that
    level: paired at the discordance seen, else unpaired on the two sizes' harmonic mean.
    ``soi``: the smallest effect of interest (a line at 0 with no paper number). An unpaired part
    says so and why (``why_unpaired``)."""
    z, alpha = level_z(m), ALPHA / max(m, 1)
    if n_second and n_second != n:
        d = Drop(*drop_interval(first, second, n, n_second, z))
        why_unpaired = "two samples of different size"
    else:
        d = drop(first, second, n, answers, z)
    if d.paired is not None:
        p = d.paired
        detectable = paired_detectable(p.n, discordance=(p.first_only + p.second_only) / p.n, alpha=alpha)
    else:
        n2 = n_second or n
        detectable = unpaired_detectable(round(2 / (1 / n + 1 / n2)), max(first, second, 1e-9), alpha=alpha)
    method = "; ".join(x for x in ((picked(m) if m > 1 else ""), ("" if d.paired is not None else why_unpaired)) if x)
    return Part(name, d.drop, d.low, d.high, line, above, paper, detectable, soi=soi,
                n=d.paired.n if d.paired is not None else n, paired=d.paired is not None, method=method)
