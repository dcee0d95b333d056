"""How the workflow's stage job runs: in its own process on one rank, or on
``hybrid_distillation.gpus_per_stage`` (G, per node) x ``nodes`` (N) ranks that it starts inside
the job and waits for (:func:`run_ranks`):

- one node: ``torchrun --standalone --nproc-per-node G -m gna.hybrid.stage_job <args.json>``,
  inside the job (Slurm's, or a workstation's GPUs);
- N > 1 nodes (Slurm only: the rule asks for ``--nodes N --ntasks-per-node G``):
  ``srun --cpus-per-task C python -m gna.hybrid.stage_job <args.json>``, one task per GPU of
  ``cpus_per_rank`` cores, with ``MASTER_ADDR`` the job's first node;
  :func:`gna.hybrid.distributed.process_group` reads srun's ``SLURM_PROCID``.

A rank that fails ends the launch with its error (torchrun stops the others; srun's
``--kill-on-bad-exit``), the script then fails, and the stage's output never appears: only rank 0
writes it, after the last step (:mod:`gna.hybrid.stage_job`). How many ranks, and what they ask of
Slurm, is :mod:`gna.hybrid.study.stage_ranks` (read when the workflow is parsed).

No torch at module level: the stage job itself (:mod:`gna.hybrid.stage_job`) is imported only to
run it here, and ``tests/test_import_graph.py`` counts :data:`STAGE_JOB`, the module every rank
runs, as an edge of the import graph.
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
from .study.settings import distillation_settings
from .study.stage_ranks import cpus_per_rank, stage_world

STAGE_JOB = "gna.hybrid.stage_job"
"""What each rank runs, ``python -m STAGE_JOB <args.json>``: that module's ``__main__``."""


def parallel_settings(distill: dict, sharding: str) -> dict:
    """:func:`gna.hybrid.distillation.distill`'s sharding arguments for a stage job from the ``hybrid_distillation``
    config and the mode the plan chose (``sharding``: "sharded" or "replicated")."""
    return {"sharding_mode": sharding, "ranks_per_node": stage_world(distill)[0],
            "activation_checkpointing": bool(distill.get("activation_checkpointing", True)),
            "gradient_sync": distill.get("gradient_sync") or "last_micro_batch"}


def workflow_stage(config: dict, rule: str, wildcards: dict, kwargs: dict, log=None) -> None:
    """A stage job of the workflow (rules distill_matrices, distill_stage):
    :func:`gna.hybrid.stage_job.distill_stage_job` with ``kwargs`` on
    ``hybrid_distillation.gpus_per_stage`` x ``nodes`` ranks of ``cpus_per_rank`` cores, the student
    replicated or sharded as the plan says (gna.plan.jobs.stage_sharding). The ranks, save_every and
    the sharding are read from the config, not the rule's params: they change no result (to the
    rounding of the gradients' sums), so they must not rerun the stages."""
    from ..plan.jobs import stage_sharding

    d = distillation_settings(config)
    kwargs = {**kwargs, "save_every": int(d["save_every"]),
              "parallel": parallel_settings(d, stage_sharding(config, rule, wildcards))}
    stage_on_ranks(kwargs, *stage_world(d), log=log, cpu_ranks=bool(d.get("cpu_ranks")), cpus=cpus_per_rank(d))


def stage_on_ranks(kwargs: dict, gpus: int = 1, nodes: int = 1, log=None, cpu_ranks: bool = False,
                   cpus: int = 4) -> None:
    """:func:`gna.hybrid.stage_job.distill_stage_job` (``kwargs``: its arguments) in this process when
    ``gpus x nodes`` is 1, else on that many ranks of ``cpus`` cores each (:func:`run_ranks`), waiting
    for them."""
    if gpus * nodes == 1:
        from .stage_job import distill_stage_job

        distill_stage_job(**kwargs)
    else:
        check_rank_devices(gpus, nodes, cpu_ranks)
        run_ranks(kwargs, gpus, nodes, log, cpus)


def check_rank_devices(gpus: int, nodes: int, cpu_ranks: bool = False, device_count: int | None = None) -> None:
    """Refuse, before any work, a stage on more ranks than this node has GPUs for: without CUDA the
    ranks would share the CPU's cores (gloo) while Snakemake counted one job, and with fewer GPUs
    than ranks two ranks would share one GPU (``set_device(local_rank % device_count)``)."""
    if device_count is None:
        import torch

        device_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    world = f"hybrid_distillation.gpus_per_stage x nodes = {gpus} x {nodes}"
    if device_count == 0 and not cpu_ranks:
        raise ConfigError(f"{world} ranks, but this machine has no CUDA GPU: set gpus_per_stage: 1 and nodes: 1, "
                          "run on GPU nodes, or set hybrid_distillation.cpu_ranks: true to run gloo ranks on the CPU")
    if 0 < device_count < gpus:
        raise ConfigError(f"{world}, but this node has {device_count} CUDA GPU(s): two ranks would share one; "
                          f"set gpus_per_stage to at most {device_count}")


def master_port(job_id: str | None) -> int:
    """A rendezvous port from the Slurm job id, so two jobs sharing a node do not collide."""
    return 29500 + int(job_id or 0) % 20000


def launch_command(args_file: str, gpus: int, nodes: int, cpus: int = 4) -> tuple[list[str], dict]:
    """(command, extra environment) that starts the ranks of a stage on ``gpus`` x ``nodes``, each
    rank bound to ``cpus`` cores (``hybrid_distillation.cpus_per_rank``). Since Slurm 22.05 an
    ``srun`` inside an allocation does not inherit the job's ``--cpus-per-task``: without it, and
    without ``SRUN_CPUS_PER_TASK``, every rank would get one core."""
    module = ["-m", STAGE_JOB, args_file]
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
    """Run :func:`gna.hybrid.stage_job.distill_stage_job` ``(**kwargs)`` on ``gpus`` x ``nodes`` ranks of ``cpus``
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
