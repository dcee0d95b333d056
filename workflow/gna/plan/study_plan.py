"""The study's resource plan as rule plan writes it (``snakemake plan``): every job of its DAG with its GPU
memory, host memory and hours, the scan methods' lines, and on a CPU study its core-hours against its
budget (refused over it) and, for the configuration the rates were measured on, the measured run beside."""
from __future__ import annotations

from pathlib import Path

import yaml

from ..config.schema import with_defaults
from ..hybrid.study.settings import distillation_settings
from ..hybrid.study.stage_ranks import cpus_per_rank, stage_world
from . import Hardware, dag_jobs, plan, read_profile, write
from .cpu_calibration import comparison_lines, read_measured
from .cpu_hours import budget_lines, check_budget, cpu_hour_lines, cpu_hours, is_cpu_study
from .cpu_rates import MEASURED, MEASURED_CONFIG
from .scan_methods import scan_method_lines, scan_methods


def write_study_plan(config: dict, md: str, csv: str, *, snakefile: str, profile: str, confirmation, log) -> None:
    """Plan the study of ``config`` (its Snakefile ``snakefile``; ``profile``: profiles/slurm/gpu.yaml, the GPU,
    its memory, throughput overrides) and write it to ``md`` and ``csv``. ``confirmation``: the confirmation
    stage's caps' most per model, whose jobs are behind its pick (falsy: none)."""
    from ..confirmation.budget import plan_lines

    gpu = read_profile(profile)
    hw = Hardware.from_dict({"gpu_mem_gb": gpu["gpu"].get("gpu_mem_gb", 80), **(gpu["gpu"].get("plan") or {})})
    jobs = dag_jobs(config, snakefile=snakefile, on_demand=True)
    rows = plan(config, jobs, hw)
    distill = distillation_settings(config)
    scanned = {dict(wc).get("model") for rule, wc in jobs if rule == "head_scan"}
    scan_rows = scan_methods(config, hw, [m for m in config["scan"]["models"] if m in scanned])
    dtype = config.get("dtype")
    sections = scan_method_lines(scan_rows, hw, dtype)
    if is_cpu_study(config):  # what the study costs where it runs, and on one GPU
        cpu_rows = cpu_hours(config, jobs, hw)
        budget = (config.get("budget") or {}).get("cpu_core_hours")
        log.info("%.1f CPU core-hours; budget %s", sum(r["cpu_h"] for r in cpu_rows), budget)
        check_budget(cpu_rows, budget)   # before a plan that would read as one the study can keep
        sections += cpu_hour_lines(cpu_rows, hw, cores=2, dtype=dtype) + budget_lines(cpu_rows, budget, cores=2)
        root = Path(snakefile).parent
        if config == with_defaults(yaml.safe_load((root / MEASURED_CONFIG).read_text())):
            sections += comparison_lines(cpu_rows, read_measured(root / MEASURED), MEASURED)
    if confirmation:   # the jobs after its pick are not in the DAG yet: its caps' most, stated here
        sections += plan_lines(config["experiments"]["confirmation"], confirmation)
    write(rows, md, csv, gpu, hw, title=config.get("study", ""), world=stage_world(distill),
          cpus_per_rank=cpus_per_rank(distill), sections=sections)
    log.info("%d jobs, %.0f GPU-hours", len(rows), sum(r.hours * r.gpus for r in rows if r.gpu))
