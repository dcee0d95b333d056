"""Data parallelism for the distillation stages under torch.distributed: the process group, each
rank's rows of a batch, the gradient reduction of a replicated student and rank-0 writing.

A stage on W ranks computes what one process computes on the same effective batch: the batch of
step ``s`` is the same ``B`` rows whatever W is (rows ``[s B, (s + 1) B)`` of the prepared token
shards), rank ``r`` takes the contiguous rows ``[r B / W, (r + 1) B / W)`` of it and goes through
them ``micro_batch_size`` at a time, every micro-batch's loss is divided by the *whole* batch's
size (rows for stage 1's mean, real tokens for stages 2-3: :meth:`World.batch_size`), and the
ranks' gradients are summed once per optimizer step (:meth:`World.reduce_gradients`), before
clipping and AdamW. mohawk's effective batch is micro-batch x accumulation x world size; here
``data.batch_size`` *is* that product and stays fixed, so changing the number of GPUs changes
neither the data order nor the result, only the rounding of the gradients' sums. A checkpoint
records optimizer steps (whole batches), so a stage resumes on any number of ranks and reads
exactly the rows it has not consumed.

Why not ``torch.nn.parallel.DistributedDataParallel``: its reducer is armed by the wrapped module's
``forward`` and fires in the backward that follows, while stages 1-2 backpropagate layer by layer
through the student's submodules (one backward per layer and micro-batch) and stage 3 with
``vocab_chunk`` chunk by chunk through its backbone and head: none goes through the wrapper's
``forward``. The reduction DDP does under ``no_sync`` (one bucketed all-reduce after the last
micro-batch) is what :meth:`World.reduce_gradients` does by hand. Every rank holds the whole student
and its AdamW state (DDP's memory). A student that does not fit one GPU per rank is sharded instead
(:mod:`gna.hybrid.sharding`, FSDP2, ``hybrid_distillation.sharding``), on the same rows, process group
and denominators; which of the two a stage runs is the plan's to say (``snakemake plan``:
results/plan/plan.md, "Distillation: memory per rank", the one source of the memory per rank).

Launch (gna.hybrid.stage_launch): ``torchrun --standalone`` on one node, ``srun`` with one
task per GPU on several; :func:`process_group` reads either's environment. Backend: NCCL on CUDA, gloo on the
CPU (the tests run 2 gloo ranks on one CPU).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..errors import ConfigError

BUCKET_ELEMENTS = 25 * 2**20
"""Gradient elements per all-reduce (DDP's 25 MB buckets, in elements): bounds the flat buffer's memory."""


@dataclass(frozen=True)
class World:
    """This process' place among the stage's ranks (one rank, no group: size 1)."""
    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: the one that logs, checkpoints and writes the output."""
        return self.rank == 0

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()

    def rows(self, batch_rows: int) -> slice:
        """This rank's rows of a batch of ``batch_rows`` (contiguous, the same count on every rank)."""
        if batch_rows % self.size:
            raise ConfigError(f"a batch of {batch_rows} rows does not split over {self.size} ranks: "
                              "hybrid_distillation.data.batch_size must be a multiple of gpus_per_stage x nodes")
        per = batch_rows // self.size
        return slice(self.rank * per, (self.rank + 1) * per)

    def shard(self, data):
        """This rank's part of a stage's data: ``step -> batch`` (random access) stays one, reading
        only this rank's rows where the stream can (:meth:`TokenShards.rows_of_step`); a
        re-iterable becomes an iterator of this rank's rows of each batch."""
        if self.size == 1:
            return data
        if hasattr(data, "rows_of_step"):
            return lambda step: data.rows_of_step(step, self.rows(data.batch_size))
        if callable(data):
            return lambda step: self._slice(data(step))
        return map(self._slice, data)

    def _slice(self, batch):
        if isinstance(batch, torch.Tensor):
            return batch[self.rows(batch.shape[0])]
        part = self.rows(batch["input_ids"].shape[0])
        return {k: v[part] if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

    def sum(self, *values: float) -> list[float]:
        """The sums over ranks of a few scalars (float64: token counts stay exact)."""
        if self.size == 1:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def batch_size(self, ids: torch.Tensor, am: torch.Tensor | None) -> tuple[int, torch.Tensor]:
        """The whole batch's (rows, real tokens) from this rank's part ids, am (b, T): the
        denominators of the stages' means. On one rank, exactly what the stages compute themselves."""
        tokens = (torch.ones_like(ids, dtype=torch.float32) if am is None else am.float()).sum()
        if self.size == 1:
            return ids.shape[0], tokens
        rows, total = self.sum(ids.shape[0], tokens.item())
        return int(rows), torch.tensor(total, dtype=torch.float32, device=ids.device)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device()) if _backend() == "nccl" else torch.device("cpu")

    def reduce_gradients(self, params) -> None:
        """Sum every gradient over the ranks, in place (each rank's loss is its share of the whole
        batch's mean, so the sum is the whole batch's gradient). Parameters without a gradient
        (not reached by this stage's loss) are skipped, the same ones on every rank."""
        if self.size == 1:
            return
        grads = [p.grad for p in params if p.grad is not None]
        groups: dict[tuple, list[torch.Tensor]] = {}
        for g in grads:
            groups.setdefault((g.dtype, g.device), []).append(g)
        for same in groups.values():
            bucket, n = [], 0
            for g in [*same, None]:
                if g is not None and (not bucket or n + g.numel() <= BUCKET_ELEMENTS):
                    bucket.append(g)
                    n += g.numel()
                    continue
                if bucket:
                    flat = torch.cat([b.reshape(-1) for b in bucket])
                    dist.all_reduce(flat)
                    at = 0
                    for b in bucket:
                        b.copy_(flat[at: at + b.numel()].view_as(b))
                        at += b.numel()
                bucket, n = ([g], g.numel()) if g is not None else ([], 0)

    def broadcast(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers to every rank (DDP's start): the ranks start equal even if
        a model's construction were not deterministic."""
        if self.size == 1:
            return
        for t in [*module.parameters(), *module.buffers()]:
            dist.broadcast(t.data, 0)

    @contextmanager
    def main_only(self):
        """Run the block on rank 0 (yields True there, False elsewhere); the others wait for it.
        A failure on rank 0 propagates from rank 0: the launcher then stops the rest."""
        yield self.main
        self.barrier()  # not reached after a failure


def _backend() -> str:
    return dist.get_backend() if dist.is_initialized() else ("nccl" if torch.cuda.is_available() else "gloo")


def current() -> World:
    """The world of this process: the initialised process group's, else one rank."""
    if not dist.is_initialized():
        return World()
    return World(dist.get_rank(), dist.get_world_size())


def launched_size() -> int:
    """Ranks this process was launched among (torchrun's ``WORLD_SIZE``, srun's ``SLURM_NTASKS``); 1: none."""
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    return int(os.environ.get("SLURM_NTASKS", 1)) if "SLURM_PROCID" in os.environ else 1


@contextmanager
def process_group(timeout_s: float = 1800):
    """Join the stage's process group when launched among several ranks, yield its :class:`World`,
    leave it afterwards. torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
    ``MASTER_PORT``; under ``srun`` the rank comes from ``SLURM_PROCID`` / ``SLURM_NTASKS`` /
    ``SLURM_LOCALID`` and the launcher exports ``MASTER_ADDR`` / ``MASTER_PORT``. One process: no group."""
    from datetime import timedelta

    size = launched_size()
    if size == 1 or dist.is_initialized():
        yield current()
        return
    if "RANK" not in os.environ:  # srun: one task per rank
        os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=str(size),
                          LOCAL_RANK=os.environ.get("SLURM_LOCALID", "0"))
    for key in ("MASTER_ADDR", "MASTER_PORT"):
        if key not in os.environ:
            raise RuntimeError(f"launched among {size} ranks without {key}: start the ranks with torchrun, "
                               "or export it before srun (gna.hybrid.stage_launch does)")
    local = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group(_backend(), timeout=timedelta(seconds=timeout_s))
    try:
        yield current()
    finally:
        dist.destroy_process_group()

