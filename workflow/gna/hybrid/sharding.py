"""Sharded distillation on torch's FSDP2 (``torch.distributed.fsdp.fully_shard``): a student whose
weights, gradients and AdamW state do not fit one GPU per rank is split over the ranks.

The recipe is goombalab/mohawk's (``training_wrapper/FSDPTrainingWrapper.py`` with
``configs/Llama/8B/bases/train.yaml``), on FSDP2 instead of the older ``FullyShardedDataParallel``:

- one FSDP unit per decoder block (mohawk: ``transformer_auto_wrap_policy`` on the block class),
  the LM head its own unit when it is not tied to the embedding, the rest (embedding, final norm)
  in the root;
- mixed precision: float32 masters (mohawk ``model_dtype: float32``), bf16 compute, float32
  gradient reductions (mohawk ``MixedPrecision(param_dtype=bf16, reduce_dtype=fp32)``): here
  ``MixedPrecisionPolicy(param_dtype=<the student's dtype>, reduce_dtype=float32)``; a float32
  student computes in float32;
- activation checkpointing of the blocks (mohawk: non-reentrant ``checkpoint_wrapper`` on each
  block), in stage 3 only: stages 1-2 run each block's backward right after its forward, where
  recomputing it would save nothing;
- gradient accumulation without a reduction per micro-batch (mohawk: ``no_sync``):
  :func:`gradient_sync` turns the reduction on for the last micro-batch only. The price: the
  unsharded float32 gradient of every trainable parameter lives across the micro-batches (the
  plan counts it); ``gradient_sync: every_micro_batch`` reduces in every micro-batch instead;
- ``HYBRID_SHARD`` (mohawk's default) where the ranks span nodes: a 2-D mesh (nodes, ranks per
  node), sharded within a node, replicated across nodes; on one node the whole world shards.

The ranks' gradients must be *summed*: each rank's loss is already its share of the whole batch's
mean (gna.hybrid.distributed). FSDP2 averages them over the ranks (its default, equal weights) and
:func:`undo_average` multiplies the reduced gradients by the world size (exact for a power-of-two
world). A custom divide factor instead would go through ``ReduceOp.PREMUL_SUM``, which gloo rejects
and NCCL computes wrongly in bf16 up to torch 2.13. The mesh is built on the device the process group computes on
(CPU under gloo): on a machine with GPUs FSDP2's default is a CUDA mesh, which segfaults under gloo.

Checkpoints (:func:`save_sharded`, :func:`load_sharded`) go through ``torch.distributed.checkpoint``:
every rank writes its shards of the weights and AdamW state, and a checkpoint loads on any number
of ranks (sharded or not) or in one process. :func:`full_state_dict` gathers the student's
weights (float32, on the CPU) on rank 0, for the stage's ordinary output checkpoint.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..errors import ConfigError
from .distributed import World

MODES = ("auto", "replicated", "sharded")


def device_mesh(world: World, ranks_per_node: int | None):
    """The mesh the student is sharded over: ``(ranks,)`` on one node, ``(nodes, ranks per node)``
    (dims ``replicate``, ``shard``) across nodes. ``ranks_per_node`` None: all ranks on one node."""
    from torch.distributed.device_mesh import init_device_mesh

    per = ranks_per_node or world.size
    if per < 1 or world.size % per:
        raise ConfigError(f"{world.size} ranks do not split into nodes of {per} ranks")
    if per == world.size:
        return init_device_mesh(world.device.type, (world.size,), mesh_dim_names=("shard",))
    return init_device_mesh(world.device.type, (world.size // per, per), mesh_dim_names=("replicate", "shard"))


def shard_student(student: nn.Module, mesh, compute_dtype: torch.dtype, checkpoint_blocks: bool) -> list:
    """Shard ``student`` (float32 masters, already equal on every rank) in place; returns its FSDP
    units, the root last. ``compute_dtype``: the dtype forwards run in (bf16 for a bf16 student)."""
    from torch.distributed._composable import checkpoint
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method

    policy = MixedPrecisionPolicy(param_dtype=None if compute_dtype == torch.float32 else compute_dtype,
                                  reduce_dtype=torch.float32)
    units = []
    for block in student.backbone.layers:
        if checkpoint_blocks:
            checkpoint(block)  # hook-based: parameter names stay as they are (checkpoints, trainable patterns)
        units.append(fully_shard(block, mesh=mesh, mp_policy=policy))
        register_fsdp_forward_method(block, "input_mixing_matrix")  # stage 1 calls it instead of forward
    head, embedding = student.get_output_embeddings(), student.get_input_embeddings()
    if head.weight is not embedding.weight:  # a tied head shares its weight with the root's embedding
        units.append(fully_shard(head, mesh=mesh, mp_policy=policy))
    units.append(fully_shard(student, mesh=mesh, mp_policy=policy))
    register_fsdp_forward_method(student, "final_hidden_states")  # stage 3's chunked loss
    # The first FSDP state to run a forward becomes the root; stage 1 never runs the student's own
    # forward, only its blocks', so the student is made the root here, before any of them.
    student._get_fsdp_state()._lazy_init()
    # A unit whose forward never runs in a stage (stages 1-2 run only the blocks) still gets its
    # post-backward at the end of every backward, which reads its unsharded parameters: gather
    # each unit once so that they exist, then free them.
    for unit in units:
        unit.unshard()
        unit.reshard()
    return units


SYNC_MODES = ("last_micro_batch", "every_micro_batch")


@torch.no_grad()
def undo_average(params, world: World) -> None:
    """FSDP2's reduced gradients are the ranks' mean; the stages' losses are shares of the whole
    batch's mean, so their gradient is the ranks' sum: multiply the (sharded) gradients by the
    number of ranks they were averaged over, once per optimizer step, before clipping."""
    for p in params:
        if p.grad is not None:
            p.grad.mul_(world.size)


def gradient_sync(student: nn.Module, when: str = "last_micro_batch"):
    """``sync(last)`` for the stages' micro-batch loop. ``when`` "last_micro_batch": reduce-scatter
    the gradients in the last micro-batch's backward only, the ones before accumulating unsharded
    on each rank; "every_micro_batch": in every micro-batch's (the sharded gradients accumulate)."""
    if when not in SYNC_MODES:
        raise ConfigError(f"hybrid_distillation.gradient_sync={when!r} is not one of {', '.join(SYNC_MODES)}")

    def sync(last: bool) -> None:
        student.set_requires_gradient_sync(last or when == "every_micro_batch")
    return sync


def _options(full: bool = False):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=full, cpu_offload=full)


def save_sharded(folder, student: nn.Module, opt) -> None:
    """Every rank's shards of the student's weights and AdamW state into ``folder`` (DCP format)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(student, opt, options=_options())
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(folder))


def load_sharded(folder, student: nn.Module, opt) -> None:
    """The weights and AdamW state of a :func:`save_sharded` checkpoint, written on any number of
    ranks, into ``student`` and ``opt`` (sharded or not; in one process without a process group too)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(student, opt, options=_options())
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(student, opt, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=_options())


def full_state_dict(student: nn.Module) -> dict[str, torch.Tensor]:
    """The whole student's weights, float32 on the CPU, on rank 0 (an empty dict on the others);
    every rank must call it. A student that is not sharded: its own state dict."""
    from torch.distributed.fsdp import FSDPModule

    if not isinstance(student, FSDPModule):
        return student.state_dict()
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(student, options=_options(full=True))


def is_sharded(student: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(student, FSDPModule)


def wants_sharding(mode: str | None, world: World) -> bool:
    """Whether a stage on ``world`` shards its student: ``mode`` "sharded" (on more than one rank),
    "replicated" (never), "auto"/None: the workflow decides from the plan before the job starts
    and passes "sharded" or "replicated"; a bare "auto" reaching here replicates."""
    if mode not in (None, *MODES):
        raise ConfigError(f"hybrid_distillation.sharding={mode!r} is not one of {', '.join(MODES)}")
    return mode == "sharded" and world.size > 1 and dist.is_initialized()
