"""The plan's CPU hours against a measured run, per experiment, and the rates fitted on it.

A measured run (``gna.plan.cpu_rates.MEASURED``, written by ``benchmarks/job_times.py --csv``) holds
per experiment the job time its rules took. :func:`parts` splits the plan's hours of each experiment
into what no rate changes (start-up, the load) and, per kind of work, the compute at the base rate;
:func:`fit` turns the measurement into each kind's efficiency (the constants of gna.plan.cpu_rates);
:func:`compare` sets the plan's hours beside the measured ones.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from .cpu_rates import CALIBRATED_ON, CPU_EFFICIENCY, CPU_LIGHT_WORK_S, LABELS, MEASURED, kind_of
from .estimate import Hardware
from .jobs import Dag, Study, estimate_job, gpu_rules
from .scan_methods import cpu_hardware

LIGHT = "a few prompts"
COLUMNS = ["experiment", "target", "rules", "jobs", "summed_h", "longest_min", "comparable_h", "adjustment"]


@functools.cache
def experiments(path: str | Path | None = None) -> dict[str, tuple[str, tuple[str, ...]]]:
    """experiment -> (the targets that build it, the rules whose jobs it sums), as the measured run's
    rows name them (default: the committed ``MEASURED``). The rules live with the measurement, not in
    code, so that an experiment stays named in its own rule file only."""
    df = read_measured(path or Path(__file__).resolve().parents[3] / MEASURED)
    return {e: (str(r["target"]), tuple(str(r["rules"]).split())) for e, r in df.iterrows()}


def read_measured(path: str | Path):
    """The measured run's rows (``COLUMNS``; '#' lines are its description), by experiment."""
    import pandas as pd

    df = pd.read_csv(path, comment="#", keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing}; expected {COLUMNS}")
    return df.set_index("experiment")


def experiment_of(rule: str) -> str | None:
    return next((e for e, (_, rules) in experiments().items() if rule in rules), None)


def parts(config: dict, jobs: Dag, hw: Hardware | None = None, results: str | Path = "results") -> dict:
    """experiment -> kind -> {"jobs", "fixed_h" (start-up, load: no rate changes them), "compute_h" (the
    FLOPs at the base rate, efficiency 1)} of the model-running jobs; a few-prompts job's light work is
    left out (``jobs`` counts it)."""
    hw = hw or Hardware()
    base = replace(cpu_hardware(hw, config.get("dtype")), light_work_s=0.0)
    at_base, no_compute = Study(config, base, results), Study(config, replace(base, fwd_tflops=1e12), results)
    out: dict = defaultdict(lambda: defaultdict(lambda: {"jobs": 0, "fixed_h": 0.0, "compute_h": 0.0}))
    model_rules = gpu_rules()
    for rule, wc in jobs:
        if rule not in model_rules or experiment_of(rule) is None:
            continue
        p = out[experiment_of(rule)][kind_of(jobs.estimators.get(rule))]
        fixed = estimate_job(no_compute, rule, wc, True, jobs.estimators).hours
        p["jobs"] += 1
        p["fixed_h"] += fixed
        p["compute_h"] += estimate_job(at_base, rule, wc, True, jobs.estimators).hours - fixed
    return out


def _hours(p: dict, kind: str | None, efficiency: dict, light_s: float) -> float:
    return p["fixed_h"] + p["compute_h"] / efficiency.get(kind, 1.0) + (p["jobs"] * light_s / 3600 if kind == LIGHT else 0)


def fit(split: dict, measured, efficiency: dict | None = None, light_s: float | None = None) -> tuple[dict, float]:
    """Each calibrated kind's efficiency (``CALIBRATED_ON``): its compute at the base rate over the time
    its experiments' ``comparable_h`` leaves it, the other kinds in them at ``efficiency`` (default the
    current constants); and the few-prompts jobs' light work in seconds (none below zero)."""
    eff = dict(CPU_EFFICIENCY if efficiency is None else efficiency)
    light = CPU_LIGHT_WORK_S if light_s is None else light_s
    fitted, fitted_light = {}, light
    for kind, exps in CALIBRATED_ON.items():
        left = sum(float(measured.loc[e, "comparable_h"]) - sum(
            (p["fixed_h"] if k == kind else _hours(p, k, eff, light)) for k, p in split[e].items()) for e in exps)
        if kind == LIGHT:
            fitted_light = max(0.0, left * 3600 / max(1, sum(split[e][kind]["jobs"] for e in exps)))
        else:
            fitted[kind] = sum(split[e][kind]["compute_h"] for e in exps) / left
    return fitted, fitted_light


def compare(rows: list[dict], measured) -> list[dict]:
    """Per measured experiment: its ``comparable_h`` and ``summed_h`` beside the plan's CPU hours
    (``rows``: gna.plan.cpu_hours.cpu_hours, summed over the experiment's rules) and what they rest on;
    ``plan_h`` None where none of its rules runs a model (the plan counts no CPU hours for a download)."""
    out = []
    for exp, m in measured.iterrows():
        mine = [r for r in rows if experiment_of(r["rule"]) == exp]
        notes = sorted({r["rate"] for r in mine}) or ["no model runs: not in the plan's CPU hours"]
        out.append({"experiment": exp, "label": LABELS.get(exp, exp), "measured_h": float(m["comparable_h"]),
                    "summed_h": float(m["summed_h"]), "plan_h": sum(r["cpu_h"] for r in mine) if mine else None,
                    "rate": "; ".join(notes)})
    return out


def comparison_lines(rows: list[dict], measured, source: str) -> list[str]:
    """The plan's markdown section of :func:`compare`."""
    lines = ["", "## On a CPU: the plan against the measured run", "",
             f"Per experiment, the job time of the measured run ({source}; *as run*: summed, *comparable*: the same "
             f"work as today's code does it on one thread a job, its file says why they differ) beside this plan's "
             f"CPU core-hours. Before the study's gradual pruning has found the minimal depth, Fig. 3 and "
             f"Table 1 are sized at the deepest minimal model, above what they take.", "",
             "| experiment | as run h | comparable h | plan h | plan / comparable | CPU rate |", "|---|---|---|---|---|---|"]
    for c in compare(rows, measured):
        plan = "-" if c["plan_h"] is None else f"{c['plan_h']:.2f}"
        ratio = "-" if c["plan_h"] is None or not c["measured_h"] else f"{c['plan_h'] / c['measured_h']:.2f}"
        lines.append(f"| {c['label']} | {c['summed_h']:.2f} | {c['measured_h']:.2f} | {plan} | {ratio} | {c['rate']} |")
    return lines

