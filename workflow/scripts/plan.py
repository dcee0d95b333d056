"""The study's resource plan: every job of its DAG with estimated GPU memory, host memory, hours."""
from pathlib import Path

import yaml

from gna.config.schema import with_defaults
from gna.confirmation.budget import plan_lines
from gna.hybrid.study.settings import distillation_settings
from gna.hybrid.study.stage_ranks import cpus_per_rank, stage_world
from gna.jobs.script_job import job
from gna.plan import Hardware, dag_jobs, plan, read_profile, write
from gna.plan.cpu_calibration import comparison_lines, read_measured
from gna.plan.cpu_hours import budget_lines, check_budget, cpu_hour_lines, cpu_hours, is_cpu_study
from gna.plan.cpu_rates import MEASURED, MEASURED_CONFIG
from gna.plan.scan_methods import scan_method_lines, scan_methods

with job(snakemake) as log:
    p = snakemake.params
    profile = read_profile(p.profile)  # profiles/slurm/gpu.yaml: the GPU, its memory, throughput overrides
    hw = Hardware.from_dict({"gpu_mem_gb": profile["gpu"].get("gpu_mem_gb", 80), **(profile["gpu"].get("plan") or {})})
    jobs = dag_jobs(dict(snakemake.config), snakefile=p.snakefile, on_demand=True)
    rows = plan(dict(snakemake.config), jobs, hw)
    distill = distillation_settings(snakemake.config)
    scanned = {dict(wc).get("model") for rule, wc in jobs if rule == "head_scan"}
    scan_rows = scan_methods(dict(snakemake.config), hw, [m for m in snakemake.config["scan"]["models"] if m in scanned])
    dtype = snakemake.config.get("dtype")
    sections = scan_method_lines(scan_rows, hw, dtype)
    if is_cpu_study(snakemake.config):  # what the study costs where it runs, and on one GPU
        cpu_rows = cpu_hours(dict(snakemake.config), jobs, hw)
        budget = (snakemake.config.get("budget") or {}).get("cpu_core_hours")
        log.info("%.1f CPU core-hours; budget %s", sum(r["cpu_h"] for r in cpu_rows), budget)
        check_budget(cpu_rows, budget)   # before a plan that would read as one the study can keep
        sections += cpu_hour_lines(cpu_rows, hw, cores=2, dtype=dtype) + budget_lines(cpu_rows, budget, cores=2)
        root = Path(p.snakefile).parent
        if dict(snakemake.config) == with_defaults(yaml.safe_load((root / MEASURED_CONFIG).read_text())):
            sections += comparison_lines(cpu_rows, read_measured(root / MEASURED), MEASURED)
    if p.confirmation:   # the jobs after its pick are not in the DAG yet: its caps' most, stated here
        sections += plan_lines(snakemake.config["experiments"]["confirmation"], p.confirmation)
    write(rows, snakemake.output.md, snakemake.output.csv, profile, hw, title=snakemake.config.get("study", ""),
          world=stage_world(distill), cpus_per_rank=cpus_per_rank(distill), sections=sections)
    log.info("%d jobs, %.0f GPU-hours", len(rows), sum(r.hours * r.gpus for r in rows if r.gpu))
