"""The baselines table of the unmodified models, from every (model, task) job's rows and cost.

The table (:func:`table`) puts, per model and task, each metric's value, its n and 95% interval, the
chance level, and the CPU seconds in all and per question; then the paper's summary numbers, each
formed from its tasks' own rows:

* the knowledge mean of ``acc`` over the six knowledge tasks, and beside it the mean of
  ``acc_norm`` over the five that have one (lm-eval's WinoGrande scores ``acc`` only; its ``acc``
  never stands in): two rows, never one mixed number;
* LAMBADA's ``acc`` with its perplexity beside it; GSM8K's exact match under each filter, apart.

Intervals: Clopper-Pearson on a task's count of right answers (:mod:`gna.evaluation.binomial`); on a
mean of tasks, the normal interval of a mean of independent proportions (each task's variance
``p(1 - p)/n``, summed, over the number of tasks squared), clipped to [0, 1].

The tables-and-figures layer of the experiment ``baselines``. One concept at two layers:
:mod:`gna.experiments.baselines` runs the jobs and counts their rows, this module tabulates them.
"""
from __future__ import annotations

import math

import pandas as pd

from ..evaluation.binomial import Z95
from ..evaluation.local_suite import KNOWLEDGE, SUFFIX
from ..experiments.baselines import BINARY, SUBTASK, chance, cpu_complete

TABLE_COLUMNS = ["model", "task", "metric", "filter", "value", "n", "ci_low", "ci_high", "chance", "cpu_s",
                 "items", "cpu_s_per_item", "cpu_s_complete"]
KNOWLEDGE_TASKS = tuple(t + SUFFIX for t in KNOWLEDGE)
# the two knowledge means: (row name, metric, tasks)
MEANS = (("knowledge_mean", "acc", KNOWLEDGE_TASKS),
         ("knowledge_mean", "acc_norm", tuple(t for t in KNOWLEDGE_TASKS if t != "winogrande" + SUFFIX)))


def _per_item(cpu_s: float, items: int) -> float:
    return cpu_s / items if items else math.nan


def _mean_row(model: str, name: str, metric: str, parts: pd.DataFrame, costs: dict) -> dict:
    p, n = parts.value.astype(float), parts.n.astype(float)
    k = len(parts)
    half = Z95 * math.sqrt(float((p * (1 - p) / n).sum())) / k
    cpu = sum(costs[(model, t)]["cpu_s"] for t in parts.task)
    items = sum(costs[(model, t)]["items"] for t in parts.task)
    mean = float(p.mean())
    return {"model": model, "task": name, "metric": metric, "filter": "none", "value": mean, "n": int(n.sum()),
            "ci_low": max(0.0, mean - half), "ci_high": min(1.0, mean + half),
            "chance": float(parts.task.map(chance).mean()), "cpu_s": cpu, "items": items,
            "cpu_s_per_item": _per_item(cpu, items),
            "cpu_s_complete": all(cpu_complete(costs[(model, t)]) for t in parts.task)}


def table(rows: pd.DataFrame, costs: dict[tuple[str, str], dict]) -> pd.DataFrame:
    """The baselines table (``TABLE_COLUMNS``) from every job's rows (with n and intervals:
    :func:`with_counts`) and ``costs``: (model, task) -> ``{"cpu_s", "items"}``. Per model, its tasks
    in the order of ``rows``, then the knowledge means (``MEANS``) where all their tasks are there."""
    rows = rows[~rows.task.str.contains(SUBTASK, regex=False)]   # a group's subtasks: its job's rows keep them
    missing = sorted({(m, t) for m, t in zip(rows.model, rows.task)} - set(costs))
    if missing:
        raise ValueError(f"baseline rows of {missing} have no cost (CPU seconds and questions)")
    out = []
    for model, own in rows.groupby("model", sort=False):
        for r in own.itertuples(index=False):
            c = costs[(model, r.task)]
            binary = r.metric in BINARY
            out.append({"model": model, "task": r.task, "metric": r.metric, "filter": r.filter,
                        "value": float(r.value), "n": r.n if binary else math.nan,
                        "ci_low": r.ci_low if binary else math.nan, "ci_high": r.ci_high if binary else math.nan,
                        "chance": chance(r.task) if binary else math.nan, "cpu_s": c["cpu_s"],
                        "items": c["items"], "cpu_s_per_item": _per_item(c["cpu_s"], c["items"]),
                        "cpu_s_complete": cpu_complete(c)})
        for name, metric, tasks in MEANS:
            parts = own[(own.metric == metric) & (own["filter"] == "none") & own.task.isin(tasks)]
            if set(parts.task) == set(tasks) and len(parts) == len(tasks):
                out.append(_mean_row(model, name, metric, parts, costs))
    return pd.DataFrame(out, columns=TABLE_COLUMNS)


def _fmt(x, digits=3) -> str:
    return "" if pd.isna(x) else f"{x:.{digits}f}"


def markdown(t: pd.DataFrame, sizes_note: str = "") -> str:
    """The table as markdown: one line per (model, task, metric, filter)."""
    lines = ["# Baselines of the unmodified models", "",
             "0-shot, each model in the study's dtype; n: questions scored, 95% interval: Clopper-Pearson on a "
             "task, on a mean of tasks the normal interval of a mean of independent proportions. "
             "`knowledge_mean acc`: the mean `acc` of the six knowledge tasks; `knowledge_mean acc_norm`: the "
             "mean `acc_norm` of the five that have one (WinoGrande scores `acc` only and is left out of it, "
             "never stood in for by its `acc`). BBH: its group's score (lm-eval's mean over the subtasks, "
             "weighted by their items); the job's rows keep each subtask's. LAMBADA's perplexity has no interval. CPU s: "
             "`time.process_time()` of the evaluation (loading apart), a resumed job's over all its runs; a "
             "mean's is its tasks' sum. `>=`: a lower bound (a resumed job whose stopped run did not keep "
             "what its finished requests cost).", ""]
    if sizes_note:
        lines += [sizes_note, ""]
    lines += ["| model | task | metric | filter | value | 95% interval | n | chance | CPU s | CPU s / item |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in t.itertuples(index=False):
        interval = "" if pd.isna(r.ci_low) else f"{r.ci_low:.3f}-{r.ci_high:.3f}"
        digits = 2 if r.metric == "perplexity" else 3
        bound = "" if r.cpu_s_complete else ">="
        lines.append(f"| {r.model} | {r.task} | {r.metric} | {r.filter} | {_fmt(r.value, digits)} | {interval} | "
                     f"{'' if pd.isna(r.n) else int(r.n)} | {_fmt(r.chance, 2)} | {bound}{_fmt(r.cpu_s, 1)} | "
                     f"{bound}{_fmt(r.cpu_s_per_item, 3)} |")
    return "\n".join(lines) + "\n"
