"""The resource plan of a study: every job of its DAG (read off ``snakemake --dag``, so it is the
DAG the rules build), each with its estimated peak GPU memory, host memory and GPU hours; the
per-rule summary; and the check of a SLURM profile against it (GPU memory, runtime, mem_mb)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..config.architectures import config_of
from ..evaluation import local_bbh, local_mmlu, local_suite
from ..hybrid.study.settings import distillation_settings
from ..hybrid.study.stage_ranks import stage_world
from ..experiments.baselines import suite_size
from ..experiments.registry import REGISTRY_OUT, resolve
from . import estimate as E
from . import job_estimates
from .estimate import Estimate, Hardware

ROOT = Path(__file__).resolve().parents[3]
RESUMABLE = {"align_student", "distill_matrices", "distill_stage"}
"""Rules that checkpoint and resume: a job killed at its time limit continues on its next attempt."""


class PlanError(ValueError):
    pass


# -- the DAG -----------------------------------------------------------------------------------

class Dag(list):
    """``[(rule, wildcards)]`` of a study's jobs, and what its rule files declare
    (gna.experiments.registry): ``estimators`` (rule -> an Estimator as a dict) for the plan, and
    ``sections`` (Sections as dicts, in order) for the findings."""

    def __init__(self, jobs, estimators: dict, sections: list | None = None, on_demand: list | None = None,
                 on_demand_rules: list | None = None):
        super().__init__(jobs)
        self.estimators, self.sections, self.on_demand = estimators, sections or [], on_demand or []
        self.on_demand_rules = on_demand_rules or []
        """Rules of on-demand experiments (the baselines): sized, but outside the study's budget."""


def dag_jobs(config: dict, snakefile: str | Path = ROOT / "Snakefile", workdir: str | Path | None = None,
             target: str | list[str] = "all", on_demand: bool = False) -> Dag:
    """Every job that ``target`` (one or a list) needs (``--forceall``), read off the dry run of
    ``snakemake`` on ``config`` (written to a temporary config file): the DAG the rules build, with the
    estimators the rule files declare (the dry run writes them: ``Registry.dump``). ``on_demand``: with
    the jobs of the targets the study's experiments build only when asked for by name (``on_demand``). A
    batch that runs a shared rule's conditions together (``Registry.shared_batches``) counts as its
    conditions."""
    targets = [target] if isinstance(target, str) else list(target)
    dag = _dag_jobs(config, snakefile, workdir, targets)
    if on_demand and dag.on_demand:   # known only once the rule files are read: a second dry run
        dag = _dag_jobs(config, snakefile, workdir, list(dict.fromkeys(targets + dag.on_demand)))
    return dag


def _dag_jobs(config: dict, snakefile, workdir, targets: list[str]) -> Dag:
    with tempfile.TemporaryDirectory() as tmp:
        cfg, declared = Path(tmp) / "config.yaml", Path(tmp) / "registry.json"
        cfg.write_text(yaml.safe_dump(config, sort_keys=True))
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--dry-run", "--forceall",
               "--nolock", "--configfile", str(cfg), "--", *targets]
        out = subprocess.run(cmd, cwd=workdir or os.getcwd(), capture_output=True, text=True,
                             env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", REGISTRY_OUT: str(declared)})
        if out.returncode:
            raise PlanError(f"snakemake --dry-run failed:\n{(out.stderr or out.stdout)[-3000:]}")
        registry = json.loads(declared.read_text())
    shared = registry.get("shared_batches", {})
    jobs = [job for rule, wc in parse_dry_run(out.stdout + out.stderr)
            for job in ([(shared[rule][0], dict(c)) for c in shared[rule][1]] if rule in shared else [(rule, wc)])]
    return Dag(jobs, registry["estimators"], registry["sections"], registry.get("on_demand"),
               registry.get("on_demand_rules"))


def parse_dry_run(text: str) -> list[tuple[str, dict]]:
    """Jobs of a dry run's listing: each ``rule X:`` block and its ``wildcards: a=b, c=d`` line."""
    out = []
    parts = re.split(r"^(?:local)?rule (\w+):\n", text, flags=re.M)
    for rule, body in zip(parts[1::2], parts[2::2]):
        m = re.search(r"^\s+wildcards: (.*)$", body.split("\n\n")[0], re.M)
        wc = dict(p.split("=", 1) for p in m.group(1).split(", ")) if m else {}
        out.append((rule, wc))
    return out


# A rule block's resources that ask for GPUs: the model jobs' (common.smk's MODEL_RESOURCES), or gpu=.
GPU_RESOURCES = re.compile(r"^\s+(\*\*MODEL_RESOURCES\b|gpu\s*=)", re.M)


def gpu_rules(rules_dir: str | Path = ROOT / "workflow/rules") -> set[str]:
    """Rules whose block asks for the ``gpu`` resource (the model-running rules)."""
    text = "\n".join(p.read_text() for p in sorted(Path(rules_dir).glob("*.smk")))
    parts = re.split(r"^rule (\w+):", text, flags=re.M)
    return {name for name, body in zip(parts[1::2], parts[2::2]) if GPU_RESOURCES.search(body)}


# -- the study's models --------------------------------------------------------------------------

def _model_cfg(config: dict, name: str) -> dict:
    m = config["models"][name]
    if "random" in m:
        from ..models.tiny import tiny_config

        r = dict(m["random"])
        r.pop("seed", None)
        return tiny_config(r.pop("family"), **r).to_dict()
    if "gguf" in m:  # converted (results/models/<name>), else the shipped architecture of its artifact
        from ..config.checks import gguf_config

        cfg = config_of(f"results/models/{name}") or gguf_config(m["gguf"], f"models.{name}")[0]
        if cfg:
            return cfg
    path = m.get("path")
    for p in (path, str(ROOT / path) if path and not os.path.isabs(path) else None):
        cfg = config_of(p)
        if cfg:
            return cfg
    raise PlanError(f"plan: no architecture config for models.{name} ({path!r}): not a local directory with a "
                    "config.json, and no data/architectures/<key>/config.json ships for that Hugging Face id")


def local_task_docs(config: dict) -> dict[str, int]:
    """Documents each local task holds, by task: the local MMLU tasks their sample (benchmarks.mmlu.size,
    not the 14,042 questions), a task built from the pinned files (``<task>_local``) its sample of
    benchmarks.suite.size (BBH's group: that many per subtask); a task whose size is all is left out
    (its lm-eval size holds)."""
    bench = config.get("benchmarks", {})
    out = {}
    mmlu = bench.get("mmlu", {}).get("size")
    if mmlu:
        out.update({t: int(mmlu) for t in local_mmlu.TASKS})
    size = bench.get("suite", {}).get("size")
    for task in local_suite.KNOWLEDGE + local_suite.RETRIEVAL + (local_suite.BBH,):
        n = size.get(task) if isinstance(size, dict) else size
        if n:
            name = local_bbh.GROUP if task == local_suite.BBH else task + local_suite.SUFFIX
            out[name] = int(n) * (len(local_bbh.SUBTASKS) if task == local_suite.BBH else 1)
    return out


def baseline_limits(study: dict[str, int], own: dict[str, int], suite: list[str]) -> dict[str, int]:
    """The documents each task holds in the baselines' own samples: ``own`` (:func:`local_task_docs` of
    experiments.baselines.size), the study's ``study`` for the tasks outside the suite (the MMLU sample);
    a suite task (``suite``) that ``own`` leaves out is taken whole, so the study's sample no longer
    limits it."""
    return {**{t: n for t, n in study.items() if t not in suite}, **own}


class Study:
    """The study's config, validated (the schema's defaults filled in: gna.config.schema.with_defaults),
    and the hardware it is planned for. ``results``: the study's results folder, where what earlier jobs
    found sizes later ones (the minimal depth, :meth:`minimal_depth`)."""

    def __init__(self, config: dict, hw: Hardware, results: str | Path = "results"):
        self.config, self.hw, self.results = config, hw, Path(results)
        self._info: dict = {}
        self.exps = config["experiments"]
        self.eval = {**config["eval"], "task_limits": local_task_docs(config)}
        # the baselines' jobs read their own samples where they have them (experiments.baselines.size)
        own = suite_size(config, self.exps.get("baselines") or {})
        bench = config.get("benchmarks", {})
        self.baseline_eval = self.eval if own is None else {**self.eval, "task_limits": baseline_limits(
            self.eval["task_limits"], local_task_docs({**config, "benchmarks": {**bench, "suite": {
                **bench.get("suite", {}), "size": own}}}), list(local_suite.TASKS))}

    def info(self, name: str) -> E.ModelInfo:
        if name not in self._info:
            m = self.config["models"][name]
            self._info[name] = E.model_info(name, _model_cfg(self.config, name), m.get("family"),
                                            self.config["dtype"])
        return self._info[name]

    def minimal_depth(self, name: str) -> int | None:
        """The minimal model's depth of ``name`` where rule minimal_model has written it (Figs. 2-3),
        else None: before gradual pruning has run, the jobs on the minimal model are sized at the
        deepest it can be (all layers but one), an upper bound."""
        path = self.results / "pruning" / f"{name}.minimal.json"
        return int(json.loads(path.read_text())["minimal_depth"]) if path.is_file() else None

    def tasks(self, *roles) -> list[str]:
        out = []
        for role in roles:
            v = self.config["tasks"].get(role) or []
            if isinstance(v, dict):
                v = [t for x in v.values() for t in ([x] if isinstance(x, str) else x)]
            out += [v] if isinstance(v, str) else list(v)
        return list(dict.fromkeys(out))


# -- one job ---------------------------------------------------------------------------------------

def estimate_job(s: Study, rule: str, wc: dict, is_gpu: bool, estimators: dict) -> Estimate:
    """One job of ``rule``: by the estimator its rule file declares (``estimators``: rule -> an
    ``Estimator`` as a dict, gna.experiments.registry), else, for a job that runs no model, a small
    CPU job."""
    est = estimators.get(rule)
    if est is not None:
        exp = {"exp": s.exps.get(est["experiment"]) or {}} if est.get("experiment") else {}
        return resolve(est["function"])(s, wc, **exp, **est.get("options", {}))
    if not is_gpu:
        return Estimate(gpu=False, gpu_gb=0.0, host_gb=2.0, hours=0.02)
    raise PlanError(f"plan: no estimator for GPU rule {rule!r}: its rule file declares one "
                    "(EXPERIMENT_REGISTRY.declare(..., plan={...}); docs/adding-an-experiment.md)")


# -- the plan --------------------------------------------------------------------------------------

@dataclass
class Row:
    """One job: ``gpu_gb`` per GPU, ``hours`` of wall time on its ``gpus`` GPUs (GPU-hours: the product)."""
    rule: str
    wildcards: str
    gpu: bool
    gpu_gb: float
    host_gb: float
    hours: float
    resumable: bool
    gpus: int = 1
    sharding: str = ""
    """A distillation stage's: "replicated" or "sharded" (gna.hybrid.sharding); "" for other jobs."""
    replicated_gb: float = 0.0
    sharded_gb: float = 0.0
    """A distillation stage's peak GPU GB per rank either way (0: sharding impossible, one GPU per node)."""


def plan(config: dict, jobs: Dag, hw: Hardware | None = None, gpus: set[str] | None = None) -> list[Row]:
    """A row per job of ``jobs`` (:func:`dag_jobs`), sized by its rule's estimator."""
    hw = hw or Hardware()
    gpus = gpu_rules() if gpus is None else gpus
    s = Study(config, hw)
    rows = []
    for rule, wc in jobs:
        e = estimate_job(s, rule, wc, rule in gpus, jobs.estimators)
        rows.append(Row(rule, ",".join(f"{k}={v}" for k, v in sorted(wc.items())), e.gpu, round(e.gpu_gb, 2),
                        round(e.host_gb, 2), e.hours, e.resumable or rule in RESUMABLE, e.gpus if e.gpu else 0,
                        e.sharding, round(e.replicated_gb, 2), round(e.sharded_gb, 2)))
    return sorted(rows, key=lambda r: (r.rule, r.wildcards))  # Snakemake lists the jobs in no fixed order


def summary(rows: list[Row]) -> list[dict]:
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r.rule, []).append(r)
    out = [{"rule": rule, "jobs": len(rs), "gpu": rs[0].gpu, "peak_gpu_gb": max(r.gpu_gb for r in rs),
            "host_gb": max(r.host_gb for r in rs), "max_job_hours": max(r.hours for r in rs),
            "gpus": max(r.gpus for r in rs), "gpu_hours": sum(r.hours * r.gpus for r in rs if r.gpu)}
           for rule, rs in by.items()]
    return sorted(out, key=lambda d: -d["gpu_hours"])


# -- the SLURM profile -----------------------------------------------------------------------------

def read_profile(profile_dir: str | Path = ROOT / "profiles/slurm") -> dict:
    p = Path(profile_dir)
    prof = yaml.safe_load((p / "config.yaml").read_text())
    gpu = yaml.safe_load((p / "gpu.yaml").read_text()) if (p / "gpu.yaml").is_file() else {}
    return {"profile": prof, "gpu": gpu}


def limits(profile: dict, rule: str) -> dict:
    prof, gpu = profile["profile"], profile["gpu"]
    res = {**(prof.get("default-resources") or {}), **((prof.get("set-resources") or {}).get(rule) or {})}
    preempt = prof.get("preemptible-rules") or []
    retries = prof.get("preemptible-retries", 0) if rule in preempt else prof.get("retries", 0)
    return {"runtime_min": float(res.get("runtime", 60)), "mem_mb": float(res.get("mem_mb", 4000)),
            "gpu_mem_gb": float(gpu.get("gpu_mem_gb", 80)), "max_runtime_min": float(gpu.get("max_runtime_min", 1e12)),
            "attempts": 1 + int(retries or 0)}


def check_profile(rows: list[Row], profile: dict) -> list[str]:
    """What of the plan the profile does not grant: GPU memory, runtime (a resumable job over its
    attempts), host memory. Empty when every job fits."""
    bad = []
    for r in rows:
        lim = limits(profile, r.rule)
        where = f"{r.rule}[{r.wildcards}]"
        if r.gpu and r.gpu_gb > lim["gpu_mem_gb"]:
            bad.append(f"{where}: peak GPU memory {r.gpu_gb:.1f} GB > {lim['gpu_mem_gb']:.0f} GB")
        budget = lim["runtime_min"] * (lim["attempts"] if r.resumable else 1)
        if r.hours * 60 > budget:
            bad.append(f"{where}: {r.hours:.1f} h > runtime {lim['runtime_min']:.0f} min"
                       + (f" x {lim['attempts']} attempts" if r.resumable else ""))
        if lim["runtime_min"] > lim["max_runtime_min"]:
            bad.append(f"{r.rule}: runtime {lim['runtime_min']:.0f} min > the partition's {lim['max_runtime_min']:.0f}")
        if r.host_gb * 1000 > lim["mem_mb"]:
            bad.append(f"{where}: host memory {r.host_gb:.1f} GB > mem_mb {lim['mem_mb']:.0f}")
    return bad


# -- output ----------------------------------------------------------------------------------------

def write(rows: list[Row], md_path, csv_path, profile: dict | None = None, hw: Hardware | None = None,
          title: str = "", world: tuple[int, int] = (1, 1), cpus_per_rank: int = 4,
          sections: list[str] | None = None) -> None:
    import pandas as pd

    hw = hw or Hardware()
    pd.DataFrame([r.__dict__ for r in rows]).to_csv(csv_path, index=False)
    summ = summary(rows)
    total = sum(d["gpu_hours"] for d in summ)
    lines = [f"# Resource plan{(': ' + title) if title else ''}", "",
             f"{len(rows)} jobs, **{total:,.0f} GPU-hours** in all "
             f"({sum(r.hours * r.gpus for r in rows if r.gpu and not r.resumable):,.0f} without the distillation "
             f"stages); estimates for {hw.gpu_mem_gb:.0f} GB GPUs, one per job, the distillation stages on "
             f"the configured ranks, replicated or sharded (last section; `gna.plan`, constants: "
             f"{hw.fwd_tflops:.0f} TFLOP/s forward, {hw.train_tflops:.0f} training, "
             f"{hw.bandwidth_gbs:.0f} GB/s, all-reduce {hw.allreduce_gbs:.0f} GB/s in a node, "
             f"{hw.internode_gbs:.0f} across nodes). Peak GPU GB is per GPU, host GB per job, hours wall time.", "",
             "| rule | jobs | GPUs/job | peak GPU GB | host GB | longest job h | GPU-hours |",
             "|---|---|---|---|---|---|---|"]
    for d in summ:
        lines.append(f"| {d['rule']} | {d['jobs']} | {d['gpus']} | {d['peak_gpu_gb']:.1f} | {d['host_gb']:.1f} | "
                     f"{d['max_job_hours']:.2f} | {d['gpu_hours']:,.1f} |" if d["gpu"] else
                     f"| {d['rule']} | {d['jobs']} | 0 | (CPU) | {d['host_gb']:.1f} | {d['max_job_hours']:.2f} | 0 |")
    lines.append(f"| **total** | {len(rows)} | | | | | **{total:,.0f}** |")
    lines += ["", f"SSM jobs (Mamba, Mamba-2, Zamba2, Llamba, the hybrids) are counted with their fused kernels "
                  f"(mamba-ssm, causal-conv1d). Without them a GPU job stops at start; with "
                  f"`GNA_FUSED_KERNELS=0` it runs the PyTorch scan: about {hw.pytorch_ssm_memory_factor:g}x "
                  f"the activation memory and at least {hw.pytorch_ssm_time_factor:g}x the time of those rows "
                  f"(`Hardware.pytorch_ssm_*`)."]
    if profile is not None:
        bad = check_profile(rows, profile)
        lines += ["", "## Against profiles/slurm", ""]
        lines += ([f"- {b}" for b in bad] if bad else ["Every job fits the profile's GPU memory, runtime "
                                                       "(resumable jobs over their attempts) and mem_mb."])
    lines += sections or []     # e.g. gna.plan.scan_methods.scan_method_lines
    from .ranks import rank_lines

    lines += rank_lines(rows, hw, world, cpus_per_rank)
    Path(md_path).write_text("\n".join(lines) + "\n")


def stage_sharding(config: dict, rule: str, wildcards: dict) -> str:
    """"sharded" or "replicated": how the stage job ``rule[wildcards]`` holds its student, as the
    plan (``snakemake plan``) says for profiles/slurm's GPU (gpu.yaml): ``hybrid_distillation.sharding``,
    and for ``auto`` on several GPUs per node the plan's estimate (:func:`gna.plan.ranks.choose_sharding`)."""
    d = distillation_settings(config)
    mode = d.get("sharding") or "auto"
    if mode != "auto" or stage_world(d)[0] == 1:
        return "sharded" if mode == "sharded" else "replicated"
    gpu = read_profile()["gpu"]
    hw = Hardware.from_dict({"gpu_mem_gb": gpu.get("gpu_mem_gb", 80), **(gpu.get("plan") or {})})
    return job_estimates.distillation_stage(Study(config, hw), dict(wildcards), exp=d).sharding
