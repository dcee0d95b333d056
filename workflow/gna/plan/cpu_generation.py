"""The CPU decode step of the plan, fitted on measured generation jobs.

A generation task's seconds (``gna.plan.estimate.generation_parts``) are its prefill and, per decode
step, every kept weight read once (or the batch's FLOPs, whichever is longer) plus HF ``generate``'s
overhead per layer. On a GPU both constants are the card's; on one CPU core they are fitted here on
the real baselines' generation jobs (GSM8K and BBH of both real models, rule ``baseline``, CPU seconds
by ``time.process_time()``): ``Hardware.cpu_bandwidth_gbs``, with no separate overhead per layer
(``gna.plan.scan_methods.cpu_hardware``). A step charges the whole generation budget (a batch runs
until its last row stops), so the fitted read also carries how early these models stop and HF
``generate``'s Python: it is per budgeted step, not the memory's bandwidth.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .estimate import GB, Hardware, generation_parts, task_size

GENERATION_MEASURED = "benchmarks/results/baselines.csv"
"""The measurement (repository-relative): the baselines table of the real preset, one CPU thread a job."""
GENERATION_CONFIG = "workflow/configs/real.yaml"
"""The config whose models and ``eval`` settings the measured jobs ran with."""
GENERATION_TASKS = ("gsm8k_local", "bbh_local")


def measured_jobs(path: str | Path) -> list[dict]:
    """The generation jobs of a baselines table: model, task, cpu_s, items (one row per job)."""
    import pandas as pd

    t = pd.read_csv(path, comment="#")
    t = t[t.task.isin(GENERATION_TASKS)].drop_duplicates(["model", "task"])
    if "cpu_s_complete" in t and not t.cpu_s_complete.all():
        raise ValueError(f"{path}: a generation job's CPU seconds are a lower bound; they cannot calibrate")
    return [{"model": r.model, "task": r.task, "cpu_s": float(r.cpu_s), "items": int(r.items)}
            for r in t.itertuples(index=False)]


def job_parts(config: dict, hw: Hardware, job: dict) -> dict:
    """A measured job's parts at ``hw``'s CPU rate (``gna.plan.scan_methods.cpu_hardware``): what no
    decode constant changes (``fixed_s``: the task's setup and the prefill), and the decode steps'
    totals, weight GB read (``gb``) and layers run (``layer_steps``), with the steps' FLOP time."""
    from .jobs import Study

    study = Study(config, hw)
    info = study.info(job["model"])
    g = generation_parts(hw, info, task_size(job["task"], job["items"]), int(study.eval["batch_size"]))
    return {"fixed_s": hw.task_setup_s + g["prefill_s"], "gb": g["steps"] * g["weight_bytes"] / GB,
            "layer_steps": g["steps"] * g["layers"], "flops_s": g["steps"] * g["flops_s"], "steps": g["steps"]}


def fit(config: dict, hw: Hardware, jobs: list[dict]) -> float:
    """The GB/s of a decode step's read that best explains ``jobs``' CPU seconds, least squares on the
    relative error (each job counts alike, whatever its size), at ``hw``'s overhead per layer (on a CPU
    none: a fit of both gives a negative overhead, since the tasks stop early by different amounts, so
    the read carries it). Refused where a job's steps would be bound by their FLOPs at the fitted
    bandwidth (then the weights' read is not what limits them)."""
    import numpy as np

    parts = [job_parts(config, hw, j) for j in jobs]
    if len(parts) < 2:
        raise ValueError("the CPU decode step needs at least two measured generation jobs")
    y = np.array([j["cpu_s"] - p["fixed_s"] - p["layer_steps"] * hw.decode_overhead_per_layer_s
                  for j, p in zip(jobs, parts)])
    a = np.array([p["gb"] for p in parts])
    w = 1 / np.array([j["cpu_s"] for j in jobs])
    inv_bw = float((w * w * a * y).sum() / (w * w * a * a).sum())
    if inv_bw <= 0:
        raise ValueError(f"the generation jobs give no positive fit (1/GB/s {inv_bw:.3g})")
    for j, p in zip(jobs, parts):
        if p["flops_s"] > p["gb"] * inv_bw:
            raise ValueError(f"{j['model']} {j['task']}: its decode steps are bound by FLOPs, not the weights' read")
    return 1 / inv_bw


def read_config(root: Path) -> dict:
    from ..config.schema import with_defaults

    return with_defaults(yaml.safe_load((root / GENERATION_CONFIG).read_text()))
