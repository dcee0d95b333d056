"""How many ranks a distillation stage runs on and what they ask of Slurm. No torch: the workflow
reads these when it is parsed.

``hybrid_distillation.gpus_per_stage`` (G, per node) and ``nodes`` (N) give the stage's world
size W = G x N (default 1 x 1: one process, as in the micro study); each rank gets
``cpus_per_rank`` cores. :mod:`gna.hybrid.stage_launch` starts the ranks inside the job
(torchrun on one node, srun across nodes).
"""
from __future__ import annotations

from ...errors import ConfigError


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
