"""How many ranks a distillation stage runs on, and how they are started. No torch: the workflow
reads :func:`stage_world` when it is parsed.

``hybrid_distillation.gpus_per_stage`` (G, per node) and ``nodes`` (N) give the stage's world
size W = G x N (default 1 x 1: one process, as in the micro study). With W > 1 the stage's script
starts the ranks and waits for them (:func:`run_ranks`):

- one node: ``torchrun --standalone --nproc-per-node G -m gna.hybrid.stage_job <args.json>``,
  inside the job (Slurm's, or a workstation's GPUs);
- N > 1 nodes (Slurm only: the rule asks for ``--nodes N --ntasks-per-node G``):
  ``srun --cpus-per-task C python -m gna.hybrid.stage_job <args.json>``, one task per GPU of
  ``cpus_per_rank`` cores, with ``MASTER_ADDR`` the job's first node;
  :func:`gna.hybrid.distributed.process_group` reads srun's ``SLURM_PROCID``.

A rank that fails ends the launch with its error (torchrun stops the others; srun's
``--kill-on-bad-exit``), the script then fails, and the stage's output never appears: only rank 0
writes it, after the last step (gna.hybrid.stage_job).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import ConfigError


def stage_world(distill: dict) -> tuple[int, int]:
    """(GPUs per node, nodes) of a stage from the ``hybrid_distillation`` config."""
    return int(distill.get("gpus_per_stage") or 1), int(distill.get("nodes") or 1)


def cpus_per_rank(distill: dict) -> int:
    """CPU cores each rank of a stage asks for (``hybrid_distillation.cpus_per_rank``): its data
    loading, its NCCL / gloo threads and the Python around the steps."""
    return int(distill.get("cpus_per_rank") or 4)


def launch_resources(gpus: int, nodes: int, cpus: int, with_gpus: bool) -> dict:
    """The Snakemake resources of a stage job on ``gpus`` x ``nodes`` ranks of ``cpus`` cores each,
    as snakemake-executor-plugin-slurm turns them into sbatch options (``with_gpus``: the study runs
    on GPUs, ``gpus_per_job`` > 0):

    - one node: one task of ``gpus x cpus`` cores (``--cpus-per-task``) holding ``--gpus=G`` on
      ``--nodes=1``; the script starts the ranks inside it with torchrun. ``tasks: 0`` and ``tasks_per_gpu: 0`` keep
      the plugin from asking one task per GPU.
    - several nodes: ``--nodes=M``, one task per rank (``--ntasks-per-node=G``, or ``--ntasks=M``
      with one GPU per node: the plugin wants more than one task per node for the first), each of
      ``cpus`` cores, and ``--gpus-per-node=G``: a total ``--gpus`` need not split evenly over the
      nodes, and two ranks would then share a GPU. ``gpu`` stays 0 there (the plugin would add a
      total ``--gpus``); the per-node request goes through ``slurm_extra``, which the plugin passes
      on as it is.
    """
    if nodes == 1:  # --nodes=1: without it Slurm may spread a --gpus=G request over several nodes
        return {"gpu": gpus if with_gpus else 0, "nodes": 1, "cpus_per_task": gpus * cpus, "tasks": 0,
                "tasks_per_gpu": 0}
    tasks = {"tasks_per_node": gpus} if gpus > 1 else {"tasks": nodes}
    return {"gpu": 0, "nodes": nodes, "mpi": "srun", **tasks, "tasks_per_gpu": 0, "cpus_per_task": cpus,
            **({"slurm_extra": f"--gpus-per-node={gpus}"} if with_gpus else {})}


def check_split(batch_sizes, ranks: int) -> None:
    """Every stage's effective batch splits into equal parts over the ranks (before any work)."""
    bad = sorted({int(b) for b in batch_sizes if int(b) % ranks})
    if bad:
        raise ConfigError(f"hybrid_distillation: the effective batch of {bad[0]} rows does not split over "
                          f"gpus_per_stage x nodes = {ranks} ranks: make data.batch_size (and by_stage's) a multiple "
                          f"of {ranks}")


def master_port(job_id: str | None) -> int:
    """A rendezvous port from the Slurm job id, so two jobs sharing a node do not collide."""
    return 29500 + int(job_id or 0) % 20000


def launch_command(args_file: str, gpus: int, nodes: int, cpus: int = 4) -> tuple[list[str], dict]:
    """(command, extra environment) that starts the ranks of a stage on ``gpus`` x ``nodes``, each
    rank bound to ``cpus`` cores (``hybrid_distillation.cpus_per_rank``). Since Slurm 22.05 an
    ``srun`` inside an allocation does not inherit the job's ``--cpus-per-task``: without it, and
    without ``SRUN_CPUS_PER_TASK``, every rank would get one core."""
    module = ["-m", "gna.hybrid.stage_job", args_file]
    if nodes == 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
                *module], {}
    job = os.environ.get("SLURM_JOB_ID")
    if not job or not shutil.which("srun"):
        raise ConfigError(f"hybrid_distillation.nodes = {nodes}: a stage on several nodes runs inside a Slurm job "
                          "(snakemake --profile profiles/slurm); set nodes: 1 to run on this machine's GPUs")
    # the executor plugin keeps only SLURM_JOB_ID of the job's variables: ask Slurm for its nodes
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True, text=True, check=True).stdout.strip()
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                           check=True).stdout.split()
    env = {"MASTER_ADDR": hosts[0], "MASTER_PORT": str(master_port(job)), "SRUN_CPUS_PER_TASK": str(cpus)}
    return ["srun", f"--jobid={job}", "--kill-on-bad-exit=1", f"--nodes={nodes}", f"--ntasks-per-node={gpus}",
            f"--ntasks={gpus * nodes}", f"--cpus-per-task={cpus}", sys.executable, *module], env


def run_ranks(kwargs: dict, gpus: int, nodes: int, log=None, cpus: int = 4) -> None:
    """Run ``gna.hybrid.stage_job.distill_stage_job(**kwargs)`` on ``gpus`` x ``nodes`` ranks of ``cpus``
    cores each and wait; their output goes to ``log`` (a file object; default stderr). Raises when a
    rank fails."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=Path(kwargs["out"]).parent, prefix=".ranks-",
                                     delete=False) as f:
        json.dump(kwargs, f)
    try:
        cmd, env = launch_command(f.name, gpus, nodes, cpus)
        path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH"))
                               if p)
        stream = log or sys.stderr
        stream.write(f"starting {gpus * nodes} ranks: {' '.join(cmd)}\n")
        stream.flush()
        # the job's threads (Snakemake's *_NUM_THREADS: one per rank, see the rules' DISTILL_THREADS) shared
        # out over the ranks, not each rank taking them all
        per_rank = str(max(1, int(os.environ.get("OMP_NUM_THREADS") or 1) // (gpus * nodes)))
        threads = {v: per_rank for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        done = subprocess.run(cmd, env={**os.environ, **threads, **env, "PYTHONPATH": path}, stdout=stream,
                              stderr=subprocess.STDOUT)
    finally:
        os.unlink(f.name)
    if done.returncode:
        raise RuntimeError(f"distillation stage on {gpus * nodes} ranks failed (exit {done.returncode}): "
                           "the failing rank's error is in the log above")
