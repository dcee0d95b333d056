"""MOHAWK-style distillation of the hybrid student, stage by stage, with atomic resumable checkpoints:
the loop (:func:`distill`). Each stage's loss is in :mod:`gna.hybrid.stage_losses`, what it trains and
its schedule in :mod:`gna.hybrid.stage_settings`.

Stages (goombalab/mohawk ``distill/distill_steps/{matrices,hstates,supervised}.py``):

1. per layer, on the teacher's own layer input ``x_l``: the student mixer's materialised matrix
   against the teacher's attention weights, ``||M_s - A_t||_F`` per (sample, head), mean, summed
   over layers (``matrices.py``). The SSM mixers train (``stage1_trainable="mixers"``, phi-mamba);
   goombalab/mohawk sets every parameter trainable, so whatever gets a gradient trains: the
   mixers and each layer's ``input_layernorm``, which the matrix is computed on (``"all"``).
2. per layer, on ``x_l``: the student layer's output against the teacher layer's output,
   ``||h_s - h_t||_2`` per token, mean, summed over layers (``hstates.py``). The mixers, kept
   attention heads and the adapter train; MLPs and norms (copied from the teacher) stay frozen,
   as in phi-mamba's ``assets/mohawk_stage2.py`` (``stage2_trainable="mixers"``). goombalab/mohawk
   trains every parameter in stage 2 (``stage2_trainable="all"``, see :func:`stage_trainable`).
3. end to end: ``KL(teacher || student)`` of the next-token distributions, mean over tokens
   (``supervised.py`` uses the cross-entropy to the teacher's softmax: same gradient). Everything trains.

Memory at paper scale: ``micro_batch_size`` (gradient accumulation over the effective batch),
stage 1's teacher attention one layer at a time, stage 3's KL in ``vocab_chunk`` token positions
at a time; see :func:`distill`.

Checkpoints: ``out_dir/step-XXXXXXXX/`` (student weights, optimizer, scheduler, RNG, state.json)
written through :func:`gna.io.atomic_path`, so a directory of that name is always complete;
the newest ``keep`` are kept. A rerun with ``resume=True`` continues from the newest one (a run
killed mid-write leaves only a hidden ``.step-*.tmp`` directory, removed on the next run) and ends
with the same weights, bit for bit on the CPU, as an uninterrupted run: the data stream is
replayed from the right step and all training state (weights, AdamW moments and step counts,
scheduler, torch's CPU and CUDA RNG) is restored exactly. On CUDA the state is restored the same
way, but the steps after it are not bit for bit: mamba-ssm's SSD backward and SDPA's backward add
with atomics (docs/reproduction-notes.md). A checkpoint written with other hyperparameters is
refused rather than mixed in. ``seed`` seeds torch at a fresh start; the data order is the caller's.

Inside a torch.distributed process group the same loop is one data-parallel rank
(:mod:`gna.hybrid.distributed`): it reads its rows of every batch, the losses' denominators are the
whole batch's, the gradients are summed over the ranks before clipping, and rank 0 alone writes
the checkpoints; a checkpoint resumes on any number of ranks. With ``sharding_mode="sharded"`` the
student is split over the ranks instead (:mod:`gna.hybrid.sharding`, FSDP2): the same rows and
denominators, the gradients reduce-scattered in the last micro-batch's backward, and every rank
writes its shards of each checkpoint (``sharded/``), which resumes on any number of ranks.
"""
from __future__ import annotations

import json
import re
import shutil
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from ..errors import ConfigError
from ..io import atomic_path
from . import sharding
from .distributed import World, current
from .precision import LOW_PRECISION, compute_dtype, master_weights
from .stage_losses import STAGE_LOSSES, batch_on
from .stage_settings import DEFAULT_TRAINABLE, check_schedule, lr_factor, param_groups

_CKPT = re.compile(r"^step-(\d{8})$")


# --------------------------------------------------------------------------------- checkpoints

def _checkpoints(out_dir: Path) -> list[tuple[int, Path]]:
    found = [(int(m[1]), p) for p in out_dir.glob("step-*") if p.is_dir() and (m := _CKPT.match(p.name))]
    return sorted(found)


def _trainer_state(opt, sched) -> dict:
    return {**({"optimizer": opt.state_dict()} if opt is not None else {}), "scheduler": sched.state_dict(),
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def _save(out_dir: Path, step: int, student, opt, sched, state: dict, keep: int, world: World) -> None:
    """Called on every rank: rank 0 writes a replicated student's checkpoint, every rank its shards
    of a sharded one (gna.hybrid.sharding: weights and AdamW state in ``sharded/``, DCP format)."""
    if sharding.is_sharded(student):
        return _save_sharded(out_dir, step, student, opt, sched, state, keep, world)
    if not world.main:
        return
    with atomic_path(out_dir / f"step-{step:08d}", directory=True) as tmp:
        torch.save(student.state_dict(), tmp / "student.pt")
        torch.save(_trainer_state(opt, sched), tmp / "trainer.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
    _prune(out_dir, keep)


def _prune(out_dir: Path, keep: int) -> None:
    for _, old in _checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _save_sharded(out_dir, step, student, opt, sched, state, keep, world) -> None:
    # one folder all ranks write into, under a name no complete checkpoint has: renamed by rank 0
    # once every rank's shards are in it (a killed save leaves only the hidden folder)
    tmp = out_dir / f".step-{step:08d}.tmp"
    with world.main_only() as main:
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
    sharding.save_sharded(tmp / "sharded", student, opt)
    with world.main_only() as main:
        if main:
            torch.save(_trainer_state(None, sched), tmp / "trainer.pt")
            (tmp / "state.json").write_text(json.dumps(state, indent=1))
            with atomic_path(out_dir / f"step-{step:08d}", directory=True) as final:
                final.rmdir()
                tmp.rename(final)
            _prune(out_dir, keep)


def _load(path: Path, student, opt, sched) -> dict:
    if (path / "sharded").is_dir():  # written sharded: loads on any number of ranks, sharded or not
        sharding.load_sharded(path / "sharded", student, opt)
    elif sharding.is_sharded(student):
        raise ConfigError(f"{path} was written by a replicated (data-parallel) run; this run shards the student: "
                          "set hybrid_distillation.sharding: replicated to resume it, or delete the folder")
    else:
        student.load_state_dict(torch.load(path / "student.pt", weights_only=True))
    trainer = torch.load(path / "trainer.pt", weights_only=True)
    if "optimizer" in trainer:
        opt.load_state_dict(trainer["optimizer"])
    sched.load_state_dict(trainer["scheduler"])
    torch.set_rng_state(trainer["rng"])
    if trainer.get("cuda_rng") is not None and torch.cuda.is_available():  # every device's generator
        torch.cuda.set_rng_state_all(trainer["cuda_rng"])
    return json.loads((path / "state.json").read_text())


# --------------------------------------------------------------------------------- the loop

def _trainable_names(student: nn.Module, stage: int, trainable) -> list[str]:
    """The names of the parameters the stage trains: ``trainable(name)``'s, else the stage's own set."""
    if trainable is None:
        pats = [re.compile(p) for p in DEFAULT_TRAINABLE[stage]]
        trainable = lambda name: any(p.search(name) for p in pats)  # noqa: E731
    names = [n for n, _ in student.named_parameters() if trainable(n)]
    if not names:
        raise ConfigError(f"stage {stage}: no trainable parameters in {type(student).__name__}")
    return names


def _fingerprint(settings: dict, schedule: dict | None, no_decay, steps: int, dtype) -> dict:
    """What a checkpoint must have been written with to be resumed: ``settings``, and the schedule, the
    parameters kept from decay and fp32 master weights only where set, so that checkpoints of runs
    without them stay resumable."""
    fingerprint = dict(settings)
    if schedule is not None:
        check_schedule(schedule, steps)
        fingerprint["schedule"] = schedule
    if no_decay:
        fingerprint["no_decay"] = no_decay
    if dtype in LOW_PRECISION:  # its checkpoints hold fp32 masters, not bf16 weights
        fingerprint["master_weights"] = "float32"
    return fingerprint


def _check_settings(stage: int, micro_batch_size: int | None, vocab_chunk: int | None) -> None:
    """:func:`distill`'s stage and memory settings refused before any work where it cannot run them."""
    if stage not in STAGE_LOSSES:
        raise ConfigError(f"stage {stage!r} is not 1 (matrices), 2 (hidden states) or 3 (logits)")
    for name, value in (("micro_batch_size", micro_batch_size), ("vocab_chunk", vocab_chunk)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{name} must be a positive integer or None, got {value!r}")


def distill(teacher: nn.Module, student: nn.Module, stage: int, data_iter, steps: int, lr: float, out_dir,
            resume: bool = True, *, max_tokens: float | None = None, seed: int = 0, save_every: int = 50,
            keep: int = 2, trainable: Callable[[str], bool] | None = None, grad_clip: float | None = 1.0,
            weight_decay: float = 0.0, warmup: int = 0, micro_batch_size: int | None = None,
            vocab_chunk: int | None = None, schedule: dict | None = None, no_decay=(), sharding_mode: str | None = None,
            ranks_per_node: int | None = None, activation_checkpointing: bool = True,
            gradient_sync: str = "last_micro_batch") -> dict:
    """Train ``student`` (in place) on stage 1, 2 or 3 for ``steps`` optimizer steps.

    ``data_iter``: a callable ``step -> batch`` (random access: resuming reads from the step it
    stopped at), or a re-iterable (list, DataLoader without shuffling) replayed from its start and
    skipped to the step. A batch is ``input_ids (B, T)`` or a dict with ``input_ids`` and
    optionally ``attention_mask``. ``max_tokens``: stop early once that many (real) tokens were seen.
    ``trainable(name)`` overrides the stage's parameter set. Returns the run's state: ``step``,
    ``tokens``, per-step ``losses`` (stage loss per layer for 1-2, KL for 3), ``resumed_from``.

    Memory (none of these change what is computed, only the rounding): ``micro_batch_size`` rows
    of each batch go forward/backward at a time, their gradients accumulated into one optimizer
    step over the whole batch (None: all rows at once); stage 1 computes each teacher layer's
    attention only while that layer's mixer is aligned; ``vocab_chunk`` (stage 3): the KL over the
    vocabulary is computed and backpropagated that many token positions at a time (None: all
    positions of a micro-batch at once, as full (b, T, V) logits). Neither enters the checkpoint
    fingerprint, so a run that ran out of memory resumes with smaller values.

    Optimizer (AdamW, betas 0.9/0.95, as goombalab/mohawk ``configs/*/bases/optimizer.yaml``):
    ``weight_decay`` on every trainable parameter, except those whose name matches a regex of
    ``no_decay`` (mohawk: none excluded); ``schedule`` (see :func:`lr_factor`: ``wsd``, ``cosine``
    or ``constant`` with warm-up/decay fractions of ``steps``) replaces the default, a constant
    ``lr`` after ``warmup`` linear steps. ``grad_clip``: max gradient norm (None: no clipping, mohawk).

    Inside a process group of several ranks, ``sharding_mode="sharded"`` shards the student over
    them with FSDP2 (:mod:`gna.hybrid.sharding`; ``ranks_per_node`` < the world size: sharded within
    a node, replicated across nodes; ``activation_checkpointing``: recompute stage 3's blocks in
    backward; ``gradient_sync``: :func:`gna.hybrid.sharding.gradient_sync`), in place: the student
    comes back sharded, its whole weights from :func:`gna.hybrid.sharding.full_state_dict`. Otherwise every rank holds the whole student.
    """
    _check_settings(stage, micro_batch_size, vocab_chunk)
    out_dir = Path(out_dir)
    names = _trainable_names(student, stage, trainable)
    schedule = None if schedule is None else dict(schedule)
    no_decay = list(no_decay) if no_decay else no_decay
    dtype = compute_dtype(student)
    fingerprint = _fingerprint(dict(stage=stage, lr=lr, seed=seed, weight_decay=weight_decay, grad_clip=grad_clip,
                                    warmup=warmup, n_trainable=len(names)), schedule, no_decay, steps, dtype)
    world = current()
    shard = sharding.wants_sharding(sharding_mode, world)
    with _training(student, set(names)), master_weights(student) as autocast:
        if shard:  # the ranks start equal (DDP's start), then each keeps its shards; FSDP casts for compute
            world.broadcast(student)
            sharding.shard_student(student, sharding.device_mesh(world, ranks_per_node), dtype,
                                   checkpoint_blocks=activation_checkpointing and stage == 3)
            autocast = nullcontext
        memory = dict(micro_batch_size=micro_batch_size, vocab_chunk=vocab_chunk,
                      sync=sharding.gradient_sync(student, gradient_sync) if shard else None)
        return _run(teacher, student, stage, data_iter, steps, lr, out_dir, resume, max_tokens, seed, save_every,
                    keep, grad_clip, weight_decay, warmup, fingerprint,
                    memory, schedule, no_decay, autocast)


@contextmanager
def _training(student: nn.Module, names: set[str]):
    """Only ``names`` require grad, in train mode; flags and mode are put back afterwards."""
    flags = {n: p.requires_grad for n, p in student.named_parameters()}
    was_training = student.training
    for n, p in student.named_parameters():
        p.requires_grad_(n in names)
    student.train()
    try:
        yield
    finally:
        for n, p in student.named_parameters():
            p.requires_grad_(flags[n])
        student.train(was_training)


def _optimizer(student, lr, weight_decay, no_decay, warmup, steps, schedule):
    """AdamW over ``student``'s trained parameters and its schedule: a linear warmup over ``warmup`` steps,
    or ``schedule`` (:func:`lr_factor`)."""
    opt = torch.optim.AdamW(param_groups(student, weight_decay, no_decay), lr=lr, betas=(0.9, 0.95),
                            weight_decay=weight_decay)
    if schedule is None:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, lr, schedule))
    return opt, sched


def _budget_left(state: dict, steps: int, max_tokens) -> bool:
    return state["step"] < steps and (max_tokens is None or state["tokens"] < max_tokens)


def _start(out_dir, resume: bool, student, opt, sched, fingerprint, seed: int, steps: int, max_tokens, world) -> dict:
    """The run's state: the last checkpoint's where ``resume`` finds one written with ``fingerprint``,
    else a fresh one (the folder's checkpoints removed, the seed set). A save killed mid-write is
    removed either way (never a checkpoint)."""
    state = dict(fingerprint=fingerprint, step=0, tokens=0, losses=[], done=False, resumed_from=0)
    found = _checkpoints(out_dir) if out_dir.is_dir() else []
    with world.main_only() as main:
        for stale in out_dir.glob(".step-*.tmp") if main else ():
            shutil.rmtree(stale, ignore_errors=True)
    if found and resume:
        state = _load(found[-1][1], student, opt, sched)
        if state["fingerprint"] != fingerprint:
            raise ConfigError(f"{found[-1][1]} was written with {state['fingerprint']}, this run is {fingerprint}: "
                              "delete the folder or pass resume=False")
        state["resumed_from"] = state["step"]
        state["done"] = not _budget_left(state, steps, max_tokens)  # a finished run asked for more steps goes on
    else:
        with world.main_only() as main:
            for _, old in found if main else ():
                shutil.rmtree(old)
        torch.manual_seed(seed)
    # every attempt's world size, kept in the checkpoints: a stage resumed on another number of ranks says so
    state.setdefault("attempts", []).append({"ranks": world.size, "from_step": state["step"]})
    return state


def _step(teacher, student, stage, batch, opt, sched, params, world, sharded: bool, grad_clip, memory,
          autocast) -> tuple[float, int]:
    """One optimizer step on ``batch`` (this rank's rows) -> (the loss summed over the ranks, the tokens
    of the whole batch)."""
    ids, am = batch_on(batch, next(student.parameters()).device)
    whole = world.batch_size(ids, am)
    opt.zero_grad(set_to_none=True)
    with autocast():  # bf16 compute for a bf16 student (fp32 masters: see gna.hybrid.precision)
        loss = STAGE_LOSSES[stage](teacher, student, ids, am, whole=whole, **memory)
    if sharded:  # FSDP reduce-scattered them (the ranks' mean) in the micro-batches' backward
        sharding.undo_average(params, world)
    else:
        world.reduce_gradients(params)
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    sched.step()
    return world.sum(float(loss))[0], int(whole[1])


def _run(teacher, student, stage, data_iter, steps, lr, out_dir, resume, max_tokens, seed, save_every, keep,
         grad_clip, weight_decay, warmup, fingerprint, memory, schedule=None, no_decay=(), autocast=nullcontext) -> dict:
    params = [p for p in student.parameters() if p.requires_grad]
    opt, sched = _optimizer(student, lr, weight_decay, no_decay, warmup, steps, schedule)
    world = current()  # one rank, or this rank of a data-parallel or sharded stage
    sharded = sharding.is_sharded(student)
    if world.size > 1 and isinstance(data_iter, (list, tuple)):  # a sized stream: a partial last batch is
        for batch in data_iter:                                    # refused before the first step
            world.rows((batch if isinstance(batch, torch.Tensor) else batch["input_ids"]).shape[0])
    state = _start(out_dir, resume, student, opt, sched, fingerprint, seed, steps, max_tokens, world)
    if not sharded:  # a sharded student was made equal on every rank before sharding
        world.broadcast(student)

    data_iter = world.shard(data_iter)  # this rank's rows of each batch
    batches = None if callable(data_iter) else iter(data_iter)
    if batches is not None:  # replay the stream up to where the checkpoint stopped
        for _ in range(state["step"]):
            next(batches)
    teacher.eval()
    while _budget_left(state, steps, max_tokens):
        try:
            batch = data_iter(state["step"]) if batches is None else next(batches)
        except StopIteration:
            break
        loss, tokens = _step(teacher, student, stage, batch, opt, sched, params, world, sharded, grad_clip, memory,
                             autocast)
        state["step"] += 1
        state["tokens"] += tokens
        state["losses"].append(loss)
        if state["step"] % save_every == 0 or not _budget_left(state, steps, max_tokens):
            state["done"] = not _budget_left(state, steps, max_tokens)
            _save(out_dir, state["step"], student, opt, sched, state, keep, world)
    if not state["done"]:  # the data ran out: the run is over all the same
        state["done"] = True
        _save(out_dir, state["step"], student, opt, sched, state, keep, world)
    return state
