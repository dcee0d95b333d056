"""The unmodified models on every benchmark of the study: one job per (model, task), one table.

Each job writes its tidy rows (:func:`gna.evaluation.lm_eval_bridge.tidy`), its per-question answers
(:mod:`gna.evaluation.items`) and its cost: the CPU seconds of the evaluation alone
(``time.process_time()``, the model's loading apart) and the questions it evaluated. The table
(:func:`table`) puts, per model and task, each metric's value, its n and 95% interval, the chance
level, and the CPU seconds in all and per question; then the paper's summary numbers, each formed
from its tasks' own rows:

* the knowledge mean of ``acc`` over the six knowledge tasks, and beside it the mean of
  ``acc_norm`` over the five that have one (lm-eval's WinoGrande scores ``acc`` only; its ``acc``
  never stands in): two rows, never one mixed number;
* LAMBADA's ``acc`` with its perplexity beside it; GSM8K's exact match under each filter, apart.

Intervals: Clopper-Pearson on a task's count of right answers (:mod:`gna.evaluation.binomial`); on a
mean of tasks, the normal interval of a mean of independent proportions (each task's variance
``p(1 - p)/n``, summed, over the number of tasks squared), clipped to [0, 1].
"""
from __future__ import annotations

import math

import pandas as pd

from ..evaluation.binomial import Z95, accuracy_interval
from ..evaluation.local_suite import KNOWLEDGE, SUFFIX
from ..probes.kv import is_probe_task, parse_probe_task, probe_task_name

# Metrics that are a mean of 0/1 per question: their rows carry n and a binomial interval.
BINARY = ("acc", "acc_norm", "exact_match")
SUBTASK = "::"  # lm-eval's name of a group's subtask in a job's rows: "<group>::<subtask>"
# Chance of each task's 0/1 metric: 1 / its choices (ARC holds a few 3- and 5-choice questions: 4 stands
# for them); an open answer (LAMBADA's word, GSM8K's number, BBH's text) has none worth a number.
CHANCE = {"arc_easy": 0.25, "arc_challenge": 0.25, "piqa": 0.5, "winogrande": 0.5, "openbookqa": 0.25,
          "hellaswag": 0.25, "mmlu_local": 0.25, "mmlu_local_cloze": 0.25, "lambada_openai": 0.0, "gsm8k": 0.0}
TABLE_COLUMNS = ["model", "task", "metric", "filter", "value", "n", "ci_low", "ci_high", "chance", "cpu_s",
                 "items", "cpu_s_per_item", "cpu_s_complete"]
KNOWLEDGE_TASKS = tuple(t + SUFFIX for t in KNOWLEDGE)
# the two knowledge means: (row name, metric, tasks)
MEANS = (("knowledge_mean", "acc", KNOWLEDGE_TASKS),
         ("knowledge_mean", "acc_norm", tuple(t for t in KNOWLEDGE_TASKS if t != "winogrande" + SUFFIX)))


def suite_size(config: dict, own: dict) -> int | dict | None:
    """The baselines' own samples of the suite's tasks (``own["size"]``, a number or one per task over
    benchmarks.suite.size), or None where they share the study's samples (no ``size`` of their own)."""
    size = (own or {}).get("size")
    if size is None:
        return None
    if not isinstance(size, dict):
        return size
    study = config["benchmarks"]["suite"]["size"]
    base = dict(study) if isinstance(study, dict) else {t: study for t in config["benchmarks"]["suite"]["tasks"]}
    return {**base, **size}


def sources(config: dict, own: dict, mmlu_task: str, n_pairs: int | None) -> dict[str, str]:
    """Task -> where its documents come from (``suite``, ``mmlu`` or ``kv``), in the table's order, for a
    study's validated ``config`` and its baselines' settings ``own`` (empty: none), with the KV probe
    of ``n_pairs`` pairs (None: none)."""
    if not own:
        return {}
    tasks = {t + SUFFIX: "suite" for t in config["benchmarks"]["suite"]["tasks"]}
    if own["mmlu"]:
        tasks[mmlu_task] = "mmlu"
    if n_pairs is not None:
        tasks[probe_task_name(n_pairs)] = "kv"   # one probe set per job: no seed in the name
    return tasks


def sizes_note(config: dict, task_sources: dict[str, str], n_pairs: int | None, own: dict | None = None) -> str:
    """The table's line on how each source was sampled (``own``: the baselines' settings)."""
    suite, mmlu, kv = config["benchmarks"]["suite"], config["benchmarks"]["mmlu"], config["kv_probe"]
    size, key = suite_size(config, own or {}), "experiments.baselines.size"
    if size is None:
        size, key = suite["size"], "benchmarks.suite.size"
    shown = (", ".join(f"{t} {n or 'all'}" + (" a subtask" if t == "bbh" and n else "") for t, n in size.items())
             if isinstance(size, dict) else size or "all")
    note = f"Samples (seeded): {key}: {shown} (a task not named: all its documents), seed {suite['seed']}"
    if "mmlu" in task_sources.values():
        note += f"; MMLU: {mmlu['size'] or 'all'} questions stratified by subject, seed {mmlu['seed']}"
    if "kv" in task_sources.values():
        note += f"; KV: {kv['n_examples']} prompts of {n_pairs} pairs, seed {kv['seed']}"
    return note + "."


def chance(task: str) -> float:
    """The chance level of ``task``'s 0/1 metric (NaN where none is known: a BBH subtask's varies)."""
    if is_probe_task(task):
        return 1 / parse_probe_task(task)[0]   # one of the prompt's n values
    return CHANCE.get(task, CHANCE.get(task.removesuffix(SUFFIX), math.nan))


def with_counts(rows: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with n and the 95% interval on every 0/1 metric that lacks them (a KV probe's, BBH's),
    n counted from ``answers``, the job's per-question table."""
    rows = rows.copy()
    for col in ("n", "ci_low", "ci_high"):
        if col not in rows:
            rows[col] = math.nan
    counts = answers.groupby(["task", "metric", "filter"]).doc_id.nunique() if len(answers) else {}
    for i, r in rows.iterrows():
        key = (r.task, r.metric, r["filter"])
        if r.metric in BINARY and pd.isna(r.n) and key in counts:
            n = int(counts[key])
            _, low, high = accuracy_interval(float(r.value), n)
            rows.loc[i, ["n", "ci_low", "ci_high"]] = [n, low, high]
    return rows


def job_items(answers: pd.DataFrame) -> int:
    """Questions a job evaluated: distinct (task, question) of its answers."""
    return 0 if answers.empty else int(answers[["task", "doc_id"]].drop_duplicates().shape[0])


def _per_item(cpu_s: float, items: int) -> float:
    return cpu_s / items if items else math.nan


def cpu_complete(cost: dict) -> bool:
    """Whether a job's CPU seconds cover all its work: a resumed job counts the units it took from the
    stopped run at what they cost there (``unpriced_units``: those kept without their cost); a resumed
    job's cost written without that count is its last run's only."""
    if "unpriced_units" in cost:
        return int(cost["unpriced_units"]) == 0
    return not cost.get("resumed", False)


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


def evaluate_task(task: str, inputs: dict, *, source: str, spec: dict, fields: dict, eval: dict, resumed: bool,
                  log) -> tuple[pd.DataFrame, list[pd.DataFrame], dict]:
    """One model, unmodified, on one benchmark task (rule baseline): its rows with n and 95% intervals
    (:func:`with_counts`), its answers, and the job's cost (CPU seconds of the evaluation and of loading,
    the questions scored). ``inputs``: the rule's ``probe`` (``source`` kv), ``sample`` (mmlu) or
    ``manifest`` (suite). A stopped run's finished requests are reused: what they cost in that run is
    added to this run's (``resumed``: whether this run found that run's state)."""
    import time
    from pathlib import Path

    from ..evaluation.lm_eval_bridge import TaskSuite
    from ..models import load_model
    from ..probes.kv import parse_probe_task, probe_suite
    from ..resume.store import reused_cost
    from .run import evaluation_rows

    start = time.process_time()
    model = load_model(spec)
    load_s = time.process_time() - start
    if source == "kv":
        # with the tokenizer: a probe whose values it makes prefixes of each other is refused here
        suite = TaskSuite(extra=probe_suite([(*parse_probe_task(task), inputs["probe"])], tokenizer=model[1]))
    elif source == "mmlu":
        suite = TaskSuite(local_mmlu_dir=str(Path(inputs["sample"]).parent))
    else:
        suite = TaskSuite(local_suite_dir=str(Path(inputs["manifest"]).parent))
    answers = []
    start = time.process_time()
    rows = evaluation_rows(spec, [task], [], eval, None, fields, model=model, suite=suite, answers=answers)
    reused = reused_cost()
    cpu_s = time.process_time() - start + reused["cpu_s"]
    table = answers[0] if answers else None
    rows, items = with_counts(rows, table), job_items(table)
    for r in rows.itertuples():
        log.info("%s %s %s = %.4f (n %s)", r.task, r.metric, r.filter, r.value, r.n)
    log.info("%d questions in %.1f CPU s (%.3f s each); loading %.1f CPU s%s", items, cpu_s,
             cpu_s / max(items, 1), load_s, f"; {reused['units']} units reused, {reused['cpu_s']:.1f} CPU s of "
             f"them from the stopped run, {reused['unpriced_units']} of unknown cost" if reused["units"] else "")
    cost = {"model": fields["model"], "task": task, "cpu_s": cpu_s, "items": items,
            "cpu_s_per_item": cpu_s / items if items else None, "load_cpu_s": load_s, "resumed": resumed,
            "reused_units": reused["units"], "unpriced_units": reused["unpriced_units"]}
    return rows, answers, cost
