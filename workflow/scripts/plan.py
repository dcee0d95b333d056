"""The study's resource plan: every job of its DAG with estimated GPU memory, host memory, hours."""
from gna.hybrid.study.settings import distillation_settings
from gna.hybrid.study.stage_ranks import cpus_per_rank, stage_world
from gna.jobs.script_job import job
from gna.plan import Hardware, dag_jobs, plan, read_profile, write
from pathlib import Path

from gna.plan.cpu_calibration import comparison_lines, read_measured
from gna.plan.cpu_hours import cpu_hour_lines, cpu_hours, is_cpu_study
from gna.plan.cpu_rates import MEASURED, MEASURED_STUDY
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
        sections += cpu_hour_lines(cpu_rows, hw, cores=2, dtype=dtype)
        if snakemake.config.get("study") == MEASURED_STUDY:  # the study the rates are calibrated on
            sections += comparison_lines(cpu_rows, read_measured(Path(p.snakefile).parent / MEASURED), MEASURED)
    write(rows, snakemake.output.md, snakemake.output.csv, profile, hw, title=snakemake.config.get("study", ""),
          world=stage_world(distill), cpus_per_rank=cpus_per_rank(distill), sections=sections)
    log.info("%d jobs, %.0f GPU-hours", len(rows), sum(r.hours * r.gpus for r in rows if r.gpu))
