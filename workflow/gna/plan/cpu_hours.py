"""A CPU study's cost in its plan: per model and rule, the jobs' CPU core-hours (the same FLOPs as the
GPU estimate at one core's rate in the study's dtype, ``gna.plan.scan_methods.cpu_gflops``, times the
efficiency its kind of work reached in a measured run, ``gna.plan.cpu_rates``) beside what one GPU would
take, and the wall time on a machine that runs one one-thread job per core."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import ConfigError
from .cpu_rates import CPU_EFFICIENCY, CALIBRATED_ON, LABELS, MEASURED, calibration_note, kind_of
from .estimate import Hardware
from .jobs import Dag, Study, estimate_job, gpu_rules
from .scan_methods import rate_name, cpu_gflops, cpu_hardware


def is_cpu_study(config: dict) -> bool:
    """A study that runs its model jobs on the CPU (device cpu, no GPUs per job)."""
    return config.get("device") == "cpu" and not config.get("gpus_per_job")


def workstation_gpu(hw: Hardware) -> Hardware:
    """``hw``'s GPU in the machine the CPU study runs on: its rates and checkpoint read, but the CPU
    job's start-up and task building. A CPU study's inputs are local files (converted checkpoints,
    local lm-eval tasks), so the cluster's per-job start-up and per-task dataset building
    (``job_overhead_s``, ``task_setup_s``: 120 s and 60 s, against seconds of compute per job here)
    would be most of its hours. CUDA's context creation is not in it (not measured here)."""
    return replace(hw, job_overhead_s=hw.cpu_job_overhead_s, task_setup_s=hw.cpu_task_setup_s)


def cpu_hours(config: dict, jobs: Dag, hw: Hardware | None = None, results: str | Path = "results") -> list[dict]:
    """Per (model, rule) of the model-running ``jobs`` (gna.plan.jobs.dag_jobs): their count, CPU
    core-hours at their kind of work's rate (``kind``; ``rate``: calibrated on what, or estimate), the
    hours of one GPU in the same machine (:func:`workstation_gpu`). ``results``: the study's results
    folder (what earlier jobs found, e.g. the minimal depth, sizes later ones)."""
    hw = hw or Hardware()
    on_cpu: dict[str | None, Study] = {}
    on_gpu = Study(config, workstation_gpu(hw), results)
    model_rules = gpu_rules()
    by: dict[tuple[str, str], dict] = {}
    for rule, wc in jobs:
        if rule not in model_rules:
            continue
        kind = kind_of(jobs.estimators.get(rule))
        if kind not in on_cpu:
            on_cpu[kind] = Study(config, cpu_hardware(hw, config.get("dtype"), kind), results)
        key = (wc.get("model") or wc.get("teacher") or "(all)", rule)
        row = by.setdefault(key, {"model": key[0], "rule": rule, "jobs": 0, "cpu_h": 0.0, "gpu_h": 0.0,
                                  "kind": kind, "rate": calibration_note(kind),
                                  "on_demand": rule in getattr(jobs, "on_demand_rules", ())})
        row["jobs"] += 1
        row["cpu_h"] += estimate_job(on_cpu[kind], rule, wc, True, jobs.estimators).hours
        row["gpu_h"] += estimate_job(on_gpu, rule, wc, True, jobs.estimators).hours
    return sorted(by.values(), key=lambda r: (r["model"], -r["cpu_h"]))


def cpu_hour_lines(rows: list[dict], hw: Hardware | None = None, cores: int = 2,
                   dtype: str | None = "float32") -> list[str]:
    """The plan's markdown section of :func:`cpu_hours`: a table, totals per model, the wall time on
    ``cores`` cores (``dtype``: the study's, for the rate it names)."""
    hw = hw or Hardware()
    total = sum(r["cpu_h"] for r in rows)
    gpu = sum(r["gpu_h"] for r in rows)
    calibrated = "; ".join(f"{kind} x{CPU_EFFICIENCY[kind]:g} ({', '.join(LABELS[e] for e in exps)})"
                           for kind, exps in CALIBRATED_ON.items() if kind in CPU_EFFICIENCY)
    lines = ["", "## On a CPU: core-hours per model and experiment", "",
             f"Every job that runs a model, its FLOPs at {cpu_gflops(hw, dtype):g} GFLOP/s per core (the exact "
             f"scan's measured {rate_name(dtype)}) times its kind of work's efficiency where a measured run "
             f"calibrates it (column *CPU rate*: the experiments it is fitted on, {MEASURED}: {calibrated}; "
             f"*estimate*: the base rate, checked against no run), one thread per job, plus "
             f"start-up and loading. Jobs on the minimal model (Fig. 3, Table 1) at its depth once "
             f"results/pruning/<model>.minimal.json holds it, before that at all layers but one (an upper bound). **{total:,.1f} CPU core-hours** in all: about **{total / cores:,.1f} h** of "
             f"wall time on {cores} cores running {cores} jobs at once (Snakemake `--cores {cores}`); one GPU "
             f"in the same machine would take **{gpu:,.2f} h**, one job at a time (the GPU rows' rates, with the "
             f"CPU job's start-up and task building, {hw.cpu_job_overhead_s:g} s and {hw.cpu_task_setup_s:g} s: "
             f"the inputs are local files; on a cluster the GPU rows above add "
             f"{hw.job_overhead_s:g} s a job and {hw.task_setup_s:g} s a task).", "",
             "| model | rule | jobs | CPU core-h | one GPU h | CPU rate |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['rule']} | {r['jobs']} | {r['cpu_h']:,.2f} | {r['gpu_h']:,.3f} | "
                     f"{r['rate']} |")
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        lines.append(f"| **{model}** | | {sum(r['jobs'] for r in mine)} | **{sum(r['cpu_h'] for r in mine):,.2f}** | "
                     f"**{sum(r['gpu_h'] for r in mine):,.3f}** | |")
    return lines


def study_rows(rows: list[dict]) -> list[dict]:
    """The rows of the study itself (``all``): an on-demand experiment's (the baselines) are sized beside
    it but are not what the budget holds."""
    return [r for r in rows if not r.get("on_demand")]


def budget_lines(rows: list[dict], budget: float | None, cores: int = 2) -> list[str]:
    """The plan's statement of the study's CPU core-hours against its budget (``budget.cpu_core_hours``;
    None: no budget stated), the on-demand targets' hours apart."""
    total = sum(r["cpu_h"] for r in study_rows(rows))
    apart = sum(r["cpu_h"] for r in rows) - total
    extra = (f" On-demand targets (not in `all`, not in the budget): {apart:,.1f} CPU core-hours more."
             if apart > 0 else "")
    if budget is None:
        return ["", f"**Budget**: none stated (`budget.cpu_core_hours`); the study takes {total:,.1f} "
                    f"CPU core-hours.{extra}"]
    return ["", f"**Budget**: {total:,.1f} of {budget:g} CPU core-hours (`budget.cpu_core_hours`, "
                f"{budget / cores:g} h of wall time on {cores} cores), {budget - total:,.1f} left.{extra}"]


def check_budget(rows: list[dict], budget: float | None) -> None:
    """Refuse a study over its stated CPU budget, naming its costliest experiments: a preset states what
    it costs, and a run planned past it would stop unfinished (or overrun the machine it was sized for)
    with nothing to show which sizes to cut. On-demand targets' rows are not the study's: left out."""
    rows = study_rows(rows)
    total = sum(r["cpu_h"] for r in rows)
    if budget is None or total <= budget:
        return
    top = sorted(rows, key=lambda r: -r["cpu_h"])[:4]
    raise ConfigError(f"budget.cpu_core_hours = {budget:g}, but the study takes {total:,.1f} CPU core-hours; "
                      "its costliest: " + ", ".join(f"{r['model']} {r['rule']} {r['cpu_h']:,.1f} h" for r in top)
                      + " (smaller samples, fewer conditions, or a larger budget)")
