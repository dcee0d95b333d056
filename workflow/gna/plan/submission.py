"""Refuse, before anything is submitted to a cluster, a distillation stage whose cluster profile
does not give it the time the resource plan says it needs: the rule's ``runtime`` over its
attempts (a stage resumes from its checkpoints, so a job killed at its limit continues on the next
attempt; profiles/slurm: ``preemptible-retries``). Without the check such a job is submitted,
killed at its limit attempt after attempt, and fails days later with its work unfinished."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError

DISTILL_RULES = ("distill_matrices", "distill_stage")


def overlong(config: dict, jobs, profile_dir) -> list[str]:
    """One line per job of ``jobs`` = ``[(rule, wildcards, runtime_min, attempts)]`` (the distillation
    stages of the DAG about to run) that its runtime over its attempts does not cover: the job,
    the plan's hours, what the profile grants and the setting to change."""
    from .estimate import Hardware
    from ..hybrid.study.settings import distillation_settings
    from .job_estimates import distillation_stage
    from .jobs import Study, read_profile

    gpu = read_profile(profile_dir)["gpu"]
    study = Study(config, Hardware.from_dict({"gpu_mem_gb": gpu.get("gpu_mem_gb", 80), **(gpu.get("plan") or {})}))
    bad = []
    for rule, wildcards, runtime_min, attempts in jobs:
        if rule not in DISTILL_RULES or runtime_min is None:
            continue
        hours = distillation_stage(study, dict(wildcards), exp=distillation_settings(config)).hours
        if hours * 60 > float(runtime_min) * attempts:
            where = ",".join(f"{k}={v}" for k, v in sorted(dict(wildcards).items()))
            bad.append(f"{rule}[{where}]: the plan gives {hours:.2f} h, the profile grants runtime {runtime_min:g} min "
                       f"x {attempts} attempt(s) = {runtime_min * attempts / 60:.2f} h: raise set-resources "
                       f"{rule} runtime (up to the partition's limit) or preemptible-retries in the profile, or "
                       "hybrid_distillation.gpus_per_stage")
    return bad


def refuse_overlong(workflow, config: dict) -> None:
    """For the workflow's ``onstart`` (after the DAG is built, before any job is submitted): on a
    cluster executor, raise :class:`ConfigError` with the first over-long stage's line."""
    if workflow.local_exec:
        return
    jobs = [(job.rule.name, job.wildcards_dict, job.resources.get("runtime"), 1 + job.restart_times)
            for job in workflow.dag.needrun_jobs() if job.rule.name in DISTILL_RULES]
    bad = overlong(config, jobs, Path(workflow.basedir) / "profiles/slurm") if jobs else []
    if bad:
        raise ConfigError(bad[0] + (f" (and {len(bad) - 1} more stage jobs)" if len(bad) > 1 else ""))
