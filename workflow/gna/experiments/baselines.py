"""The unmodified models on every benchmark of the study: one job per (model, task), one table.

Each job writes its tidy rows (:func:`gna.evaluation.lm_eval_bridge.tidy`), its per-question answers
(:mod:`gna.evaluation.items`) and its cost: the CPU seconds of the evaluation alone
(``time.process_time()``, the model's loading apart) and the questions it evaluated.

The computation layer of the experiment ``baselines``: its jobs' rows, their counts and costs, and
the tasks' sources and sizes the rules read; the table drawn from them is :mod:`gna.report.baselines`.
One concept at two layers.
"""
from __future__ import annotations

import math

import pandas as pd

from ..evaluation.binomial import accuracy_interval
from ..evaluation.local_suite import SUFFIX
from ..probes.kv import is_probe_task, parse_probe_task, probe_task_name

# Metrics that are a mean of 0/1 per question: their rows carry n and a binomial interval.
BINARY = ("acc", "acc_norm", "exact_match")
SUBTASK = "::"  # lm-eval's name of a group's subtask in a job's rows: "<group>::<subtask>"
# Chance of each task's 0/1 metric: 1 / its choices (ARC holds a few 3- and 5-choice questions: 4 stands
# for them); an open answer (LAMBADA's word, GSM8K's number, BBH's text) has none worth a number.
CHANCE = {"arc_easy": 0.25, "arc_challenge": 0.25, "piqa": 0.5, "winogrande": 0.5, "openbookqa": 0.25,
          "hellaswag": 0.25, "mmlu_local": 0.25, "mmlu_local_cloze": 0.25, "lambada_openai": 0.0, "gsm8k": 0.0}


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


def cpu_complete(cost: dict) -> bool:
    """Whether a job's CPU seconds cover all its work: a resumed job counts the units it took from the
    stopped run at what they cost there (``unpriced_units``: those kept without their cost); a resumed
    job's cost written without that count is its last run's only."""
    if "unpriced_units" in cost:
        return int(cost["unpriced_units"]) == 0
    return not cost.get("resumed", False)


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
