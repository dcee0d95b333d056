"""MOHAWK-style distillation of the hybrid student, stage by stage, with atomic resumable checkpoints.

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
the checkpoints; a checkpoint resumes on any number of ranks.
"""
from __future__ import annotations

import json
import math
import re
import shutil
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..io import atomic_path
from ..patterns.mixing import eager_attention
from ..models import adapter_for
from .distributed import current
from .precision import LOW_PRECISION, compute_dtype, master_weights

PAPER_TOKENS = {1: 3e8, 2: 5e9, 3: 2e10}  # the follow-up's budgets (mohawk configs' n_tokens)
_TRAINABLE = {1: (r"\.mixer\.",), 2: (r"\.mixer\.", r"\.attn\.", r"\.adapter\."), 3: (r"",)}
_CKPT = re.compile(r"^step-(\d{8})$")
STAGE_TRAINABLE = {1: {"mixers": _TRAINABLE[1], "all": (r"",)}, 2: {"mixers": _TRAINABLE[2], "all": (r"",)}}
SCHEDULES = ("constant", "wsd", "cosine")


def stage_trainable(stage: int, which: str | None) -> Callable[[str], bool] | None:
    """The ``trainable`` override of stage 1 or 2: ``which`` = ``"mixers"`` (the default: stage 1 the
    SSM mixers; stage 2 the SSM mixers, kept attention heads, adapter) or ``"all"`` (every parameter,
    goombalab/mohawk's: its ``configs/Llama/1B/bases/_{matrices,hstates}.yaml`` leave
    ``optimize_weights`` black/white lists null, so ``distill/utils.py::setup_gradients`` sets
    ``requires_grad`` on every parameter; what takes no part in the stage's per-layer loss, e.g. the
    embedding, final norm and LM head, gets no gradient and so is not stepped, not even decayed).
    None: the stage's default set."""
    if which is None:
        return None
    if stage not in STAGE_TRAINABLE:
        raise ConfigError(f"stage{stage}_trainable: only stages 1 and 2 have a choice, not stage {stage}")
    if which not in STAGE_TRAINABLE[stage]:
        raise ConfigError(f"stage{stage}_trainable={which!r} is not 'mixers' or 'all'")
    pats = [re.compile(p) for p in STAGE_TRAINABLE[stage][which]]
    return lambda name: any(p.search(name) for p in pats)


def _schedule_steps(value, total: int) -> int:
    """mohawk's ``distill/utils.py::setup_scheduler``: a value in (0, 1) is that fraction of the
    steps (rounded down), anything else a number of steps."""
    value = float(value or 0)
    return int(value * total) if 0 < value < 1 else int(value)


def lr_factor(step: int, total: int, lr: float, schedule: dict) -> float:
    """The learning rate of optimizer step ``step`` (0-based) of ``total``, as a factor of ``lr``.

    ``schedule``: ``{name, warmup, decay, warmup_start_lr, min_lr}`` (warmup/decay: fractions in
    (0, 1) or steps). Names:

    - ``wsd``: goombalab/mohawk ``utils/wsd_scheduler.py::lr_wsd_lambda`` (phase "entire", linear
      decay): linear from ``warmup_start_lr`` (at step 0) to ``lr`` over ``warmup`` steps, flat, then
      linear from ``lr`` to ``min_lr`` over the last ``decay`` steps (``min_lr`` after them);
    - ``cosine``: the closed form of pl_bolts' ``LinearWarmupCosineAnnealingLR``, mohawk's other
      scheduler: linear from ``warmup_start_lr`` to ``lr`` over ``warmup`` steps (``lr`` at step
      ``warmup - 1``), then a half cosine from ``lr`` down to ``min_lr`` at ``total``;
    - ``constant``: ``lr`` throughout (after the same linear warm-up, if any).
    """
    name = schedule.get("name", "wsd")
    if name not in SCHEDULES:
        raise ConfigError(f"schedule {name!r} is not one of {', '.join(SCHEDULES)}")
    warmup, decay = _schedule_steps(schedule.get("warmup"), total), _schedule_steps(schedule.get("decay"), total)
    start, low = float(schedule.get("warmup_start_lr", 0.0)), float(schedule.get("min_lr", 0.0))
    if name == "cosine":
        if step < warmup:
            return (start + step * (lr - start) / max(1, warmup - 1)) / lr
        return (low + 0.5 * (lr - low) * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))) / lr
    if step < warmup:
        return (step / warmup * (lr - start) + start) / lr
    if name == "constant" or step < total - decay:
        return 1.0
    if step < total:
        return ((total - step) / decay * (lr - low) + low) / lr
    return low / lr


def check_schedule(schedule: dict, total: int) -> None:
    """mohawk's check: ``0 <= warmup + decay < total`` steps."""
    name = schedule.get("name", "wsd")
    if name not in SCHEDULES:
        raise ConfigError(f"schedule {name!r} is not one of {', '.join(SCHEDULES)}")
    unknown = set(schedule) - {"name", "warmup", "decay", "warmup_start_lr", "min_lr"}
    if unknown:
        raise ConfigError(f"schedule: unknown keys {sorted(unknown)}")
    warmup, decay = _schedule_steps(schedule.get("warmup"), total), _schedule_steps(schedule.get("decay"), total)
    if not 0 <= warmup + decay < total:
        raise ConfigError(f"schedule: warm-up ({warmup}) + decay ({decay}) steps must be fewer than the stage's "
                          f"{total} steps")


def _param_groups(student: nn.Module, weight_decay: float, no_decay) -> list:
    """AdamW's parameters: one list (every trainable parameter decays: mohawk's
    ``distill/utils.py::setup_optimizer``), or with ``no_decay`` patterns two groups, those matching
    any of them without weight decay."""
    params = [(n, p) for n, p in student.named_parameters() if p.requires_grad]
    if not no_decay:
        return [p for _, p in params]
    pats = [re.compile(x) for x in no_decay]
    skip = [any(x.search(n) for x in pats) for n, _ in params]
    return [{"params": [p for (_, p), s in zip(params, skip) if not s], "weight_decay": weight_decay},
            {"params": [p for (_, p), s in zip(params, skip) if s], "weight_decay": 0.0}]


def stage_options(run: dict, stage: int) -> dict:
    """The keyword arguments of :func:`distill` that a stage's run settings (the workflow's
    ``DISTILL_STAGE[stage]``) set: ``weight_decay``, ``schedule``, ``no_decay``, ``grad_clip``
    (0: none) and, in stages 1 and 2, ``stage1_trainable`` / ``stage2_trainable``. A key absent
    from ``run`` keeps distill's default (the micro study's settings, unchanged)."""
    out = {key: run[key] for key in ("weight_decay", "schedule", "no_decay") if run.get(key) is not None}
    if run.get("grad_clip") is not None:
        out["grad_clip"] = float(run["grad_clip"]) or None
    which = run.get(f"stage{stage}_trainable")
    if which is not None and stage in STAGE_TRAINABLE:
        out["trainable"] = stage_trainable(stage, which)
    return out


# --------------------------------------------------------------------------------- teacher side

@contextmanager
def _per_layer(teacher: nn.Module, consume: Callable, attention: bool):
    """During a teacher forward, hand each layer's targets to ``consume`` as soon as they exist.

    ``consume(i, x_i, target)``: ``x_i`` is layer i's input (B, T, d); ``target`` its attention
    weights (B, H, T, T) when ``attention`` (the forward then runs eager attention, the one that
    returns weights), else its output (B, T, d). The teacher keeps nothing: the weights are
    dropped from the attention module's output once consumed (the layer ignores them anyway), so
    at most one layer's (B, H, T, T) matrix is alive at a time. ``consume`` runs inside the
    teacher's forward, so it must switch grad back on itself.
    """
    layers = adapter_for(teacher).layers()
    inputs: dict[int, torch.Tensor] = {}
    with ExitStack() as stack:
        for i, layer in enumerate(layers):
            def pre(m, args, kwargs, i=i):
                inputs[i] = args[0] if args else kwargs["hidden_states"]

            stack.callback(layer.register_forward_pre_hook(pre, with_kwargs=True).remove)
            if attention:
                def attn_done(m, args, out, i=i):
                    consume(i, inputs.pop(i), out[1])
                    return (out[0], None, *out[2:])

                stack.callback(layer.self_attn.register_forward_hook(attn_done).remove)
            else:
                def layer_done(m, args, kwargs, out, i=i):
                    consume(i, inputs.pop(i), out[0] if isinstance(out, tuple) else out)

                stack.callback(layer.register_forward_hook(layer_done, with_kwargs=True).remove)
        if attention:
            stack.enter_context(eager_attention(teacher))
        yield


def _batch(b, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    ids, am = (b, None) if isinstance(b, torch.Tensor) else (b["input_ids"], b.get("attention_mask"))
    return ids.to(device), None if am is None else am.to(device)


def _micro_batches(ids: torch.Tensor, am: torch.Tensor | None, size: int | None):
    """Rows of the effective batch ids (B, T) in consecutive slices of ``size`` (all at once for None)."""
    if size is None or size >= ids.shape[0]:
        return [(ids, am)]
    return [(ids[i:i + size], None if am is None else am[i:i + size]) for i in range(0, ids.shape[0], size)]


def _real_tokens(ids: torch.Tensor, am: torch.Tensor | None) -> torch.Tensor:
    """Total weight of the effective batch's tokens (the denominator of stages 2-3's means)."""
    return (torch.ones_like(ids, dtype=torch.float32) if am is None else am.float()).sum()


# --------------------------------------------------------------------------------- losses
# Each stage's loss is a mean over the *effective* batch ids (B, T). With micro-batches, every
# micro-batch backpropagates its share of that mean (its sum over the same denominator), so the
# accumulated gradients are those of the whole batch; with one micro-batch the arithmetic is the
# unchunked one, operation for operation. On several ranks ids is this rank's part of the batch and
# ``whole`` = (rows, real tokens) of the whole batch gives the denominators (gna.hybrid.distributed).

def _stage1(teacher, student, ids, am, micro_batch_size=None, vocab_chunk=None, whole=None) -> torch.Tensor:
    layers = student.backbone.layers
    total = 0.0
    for mids, mam in _micro_batches(ids, am, micro_batch_size):
        share = mids.shape[0] / (ids.shape[0] if whole is None else whole[0])  # of the effective batch's mean
        valid = 1.0 if mam is None else (mam[:, None, :, None] * mam[:, None, None, :]).float()

        def align(i, x, A):  # A: teacher layer i's attention (b, H, T, T), freed after this
            nonlocal total
            with torch.enable_grad():
                layer = layers[i]
                M = layer.mixer.mixing_matrix(layer.input_layernorm(x), mam)      # (b, H, T, T)
                loss = torch.linalg.matrix_norm((M - A.float()) * valid, ord="fro").mean()
                if share != 1:
                    loss = loss * share
                loss.backward()  # each loss touches layer i only; its graph is freed now
            total += loss.item()

        with torch.no_grad(), _per_layer(teacher, align, attention=True):
            teacher(input_ids=mids, attention_mask=mam, use_cache=False)
    return torch.tensor(total / len(layers))


def _stage2(teacher, student, ids, am, micro_batch_size=None, vocab_chunk=None, whole=None) -> torch.Tensor:
    layers = student.backbone.layers
    denominator = _real_tokens(ids, am) if whole is None else whole[1]
    total = 0.0
    for mids, mam in _micro_batches(ids, am, micro_batch_size):
        w = torch.ones_like(mids, dtype=torch.float32) if mam is None else mam.float()

        def align(i, x, y):  # x, y: teacher layer i's input and output (b, T, d)
            nonlocal total
            with torch.enable_grad():
                dist = (layers[i](x, attention_mask=mam) - y).float().norm(dim=-1)   # (b, T)
                loss = (dist * w).sum() / denominator
                loss.backward()
            total += loss.item()

        with torch.no_grad(), _per_layer(teacher, align, attention=False):
            teacher(input_ids=mids, attention_mask=mam, use_cache=False)
    return torch.tensor(total / len(layers))


def _kl_sum(t: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) per token from logits t, s (..., V) float32 -> (...)."""
    p = F.log_softmax(t, -1)
    return (p.exp() * (p - F.log_softmax(s, -1))).sum(-1)


def _stage3_chunked(teacher, student, ids, am, denominator, chunk: int) -> torch.Tensor:
    """Stage 3's loss over ``chunk`` token positions at a time, backpropagated chunk by chunk.

    The final hidden states of both models are computed once ((b, T, d): small); each chunk's
    logits (chunk, V) are made from them through the LM heads, its loss backpropagated into the
    student's hidden states (a detached leaf) and head, and freed before the next chunk. Then the
    hidden states' accumulated gradient goes through the student's body once. Only one chunk's
    vocabulary-wide tensors live at a time instead of several (b, T, V) ones.
    """
    if getattr(teacher.config, "final_logit_softcapping", None) is not None:
        raise ConfigError("vocab_chunk: the teacher's logits are not lm_head(hidden) (final_logit_softcapping); "
                          "set experiments.hybrid_distillation.vocab_chunk to null")
    with torch.no_grad():
        h_t = teacher.base_model(input_ids=ids, attention_mask=am, use_cache=False).last_hidden_state
    head_t, head_s = teacher.get_output_embeddings(), student.get_output_embeddings()
    V = head_t.weight.shape[0]
    h_s = student.backbone(ids, attention_mask=am).last_hidden_state                  # (b, T, d), with graph
    leaf = h_s.detach().requires_grad_()
    flat_t, flat_s = h_t.flatten(0, 1), leaf.flatten(0, 1)                            # (N, d)
    w = torch.ones(flat_s.shape[0], device=flat_s.device) if am is None else am.flatten().float()
    total = torch.zeros((), device=flat_s.device)
    for start in range(0, flat_s.shape[0], chunk):
        part = slice(start, start + chunk)
        with torch.no_grad():
            t = head_t(flat_t[part]).float()                                          # (chunk, V)
        s = head_s(flat_s[part].to(head_s.weight.dtype)).float()[..., :V]             # as the student's forward
        loss = (_kl_sum(t, s) * w[part]).sum() / denominator
        loss.backward()  # into leaf.grad and the student's head; this chunk's graph is freed
        total += loss.detach()
    h_s.backward(leaf.grad)
    return total


def _stage3(teacher, student, ids, am, micro_batch_size=None, vocab_chunk=None, whole=None) -> torch.Tensor:
    denominator = _real_tokens(ids, am) if whole is None else whole[1]
    total = None
    for mids, mam in _micro_batches(ids, am, micro_batch_size):
        if vocab_chunk:
            loss = _stage3_chunked(teacher, student, mids, mam, denominator, vocab_chunk)
        else:
            with torch.no_grad():
                t = teacher(input_ids=mids, attention_mask=mam, use_cache=False).logits.float()
            s = student(input_ids=mids, attention_mask=mam).logits[..., :t.shape[-1]].float()
            kl = _kl_sum(t, s)                                                         # (b, T)
            w = torch.ones_like(kl) if mam is None else mam.float()
            loss = (kl * w).sum() / denominator
            loss.backward()
            loss = loss.detach()
        total = loss if total is None else total + loss
    return total


_STEP = {1: _stage1, 2: _stage2, 3: _stage3}


# --------------------------------------------------------------------------------- checkpoints

def _checkpoints(out_dir: Path) -> list[tuple[int, Path]]:
    found = [(int(m[1]), p) for p in out_dir.glob("step-*") if p.is_dir() and (m := _CKPT.match(p.name))]
    return sorted(found)


def _save(out_dir: Path, step: int, student, opt, sched, state: dict, keep: int) -> None:
    with atomic_path(out_dir / f"step-{step:08d}", directory=True) as tmp:
        torch.save(student.state_dict(), tmp / "student.pt")
        torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "rng": torch.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
                   tmp / "trainer.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
    for _, old in _checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _load(path: Path, student, opt, sched) -> dict:
    student.load_state_dict(torch.load(path / "student.pt", weights_only=True))
    trainer = torch.load(path / "trainer.pt", weights_only=True)
    opt.load_state_dict(trainer["optimizer"])
    sched.load_state_dict(trainer["scheduler"])
    torch.set_rng_state(trainer["rng"])
    if trainer.get("cuda_rng") is not None and torch.cuda.is_available():  # every device's generator
        torch.cuda.set_rng_state_all(trainer["cuda_rng"])
    return json.loads((path / "state.json").read_text())


# --------------------------------------------------------------------------------- the loop

def distill(teacher: nn.Module, student: nn.Module, stage: int, data_iter, steps: int, lr: float, out_dir,
            resume: bool = True, *, max_tokens: float | None = None, seed: int = 0, save_every: int = 50,
            keep: int = 2, trainable: Callable[[str], bool] | None = None, grad_clip: float | None = 1.0,
            weight_decay: float = 0.0, warmup: int = 0, micro_batch_size: int | None = None,
            vocab_chunk: int | None = None, schedule: dict | None = None, no_decay=()) -> dict:
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
    """
    if stage not in _STEP:
        raise ConfigError(f"stage {stage!r} is not 1 (matrices), 2 (hidden states) or 3 (logits)")
    for name, value in (("micro_batch_size", micro_batch_size), ("vocab_chunk", vocab_chunk)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{name} must be a positive integer or None, got {value!r}")
    out_dir = Path(out_dir)
    if trainable is None:
        pats = [re.compile(p) for p in _TRAINABLE[stage]]
        trainable = lambda name: any(p.search(name) for p in pats)  # noqa: E731
    names = [n for n, _ in student.named_parameters() if trainable(n)]
    if not names:
        raise ConfigError(f"stage {stage}: no trainable parameters in {type(student).__name__}")
    fingerprint = dict(stage=stage, lr=lr, seed=seed, weight_decay=weight_decay, grad_clip=grad_clip,
                       warmup=warmup, n_trainable=len(names))
    if schedule is not None:  # only when set: checkpoints of runs without one stay resumable
        schedule = dict(schedule)
        check_schedule(schedule, steps)
        fingerprint["schedule"] = schedule
    if no_decay:
        no_decay = list(no_decay)
        fingerprint["no_decay"] = no_decay
    if compute_dtype(student) in LOW_PRECISION:  # its checkpoints hold fp32 masters, not bf16 weights
        fingerprint["master_weights"] = "float32"
    with _training(student, set(names)), master_weights(student) as autocast:
        return _run(teacher, student, stage, data_iter, steps, lr, out_dir, resume, max_tokens, seed, save_every,
                    keep, grad_clip, weight_decay, warmup, fingerprint,
                    dict(micro_batch_size=micro_batch_size, vocab_chunk=vocab_chunk), schedule, no_decay, autocast)


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


def _run(teacher, student, stage, data_iter, steps, lr, out_dir, resume, max_tokens, seed, save_every, keep,
         grad_clip, weight_decay, warmup, fingerprint, memory, schedule=None, no_decay=(), autocast=nullcontext) -> dict:
    params = [p for p in student.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(_param_groups(student, weight_decay, no_decay), lr=lr, betas=(0.9, 0.95),
                            weight_decay=weight_decay)
    if schedule is None:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, lr, schedule))

    def budget_left() -> bool:
        return state["step"] < steps and (max_tokens is None or state["tokens"] < max_tokens)

    world = current()  # one rank, or this rank of a data-parallel stage: rank 0 writes
    if world.size > 1 and isinstance(data_iter, (list, tuple)):  # a sized stream: a partial last batch is
        for batch in data_iter:                                    # refused before the first step
            world.rows((batch if isinstance(batch, torch.Tensor) else batch["input_ids"]).shape[0])
    state = dict(fingerprint=fingerprint, step=0, tokens=0, losses=[], done=False, resumed_from=0)
    found = _checkpoints(out_dir) if out_dir.is_dir() else []
    with world.main_only() as main:
        for stale in out_dir.glob(".step-*.tmp") if main else ():  # a save killed mid-write (never a checkpoint)
            shutil.rmtree(stale, ignore_errors=True)
    if found and resume:
        state = _load(found[-1][1], student, opt, sched)
        if state["fingerprint"] != fingerprint:
            raise ConfigError(f"{found[-1][1]} was written with {state['fingerprint']}, this run is {fingerprint}: "
                              "delete the folder or pass resume=False")
        state["resumed_from"] = state["step"]
        state["done"] = not budget_left()  # a finished run asked for more steps goes on
    else:
        with world.main_only() as main:
            for _, old in found if main else ():
                shutil.rmtree(old)
        torch.manual_seed(seed)
    # every attempt's world size, kept in the checkpoints: a stage resumed on another number of ranks says so
    state.setdefault("attempts", []).append({"ranks": world.size, "from_step": state["step"]})
    world.broadcast(student)

    data_iter = world.shard(data_iter)  # this rank's rows of each batch
    batches = None if callable(data_iter) else iter(data_iter)
    if batches is not None:  # replay the stream up to where the checkpoint stopped
        for _ in range(state["step"]):
            next(batches)
    teacher.eval()
    while budget_left():
        try:
            batch = data_iter(state["step"]) if batches is None else next(batches)
        except StopIteration:
            break
        ids, am = _batch(batch, next(student.parameters()).device)
        whole = world.batch_size(ids, am)
        opt.zero_grad(set_to_none=True)
        with autocast():  # bf16 compute for a bf16 student (fp32 masters: see gna.hybrid.precision)
            loss = _STEP[stage](teacher, student, ids, am, whole=whole, **memory)
        world.reduce_gradients(params)
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        sched.step()
        state["step"] += 1
        state["tokens"] += int(whole[1])
        state["losses"].append(world.sum(float(loss))[0])
        if state["step"] % save_every == 0 or not budget_left():
            state["done"] = not budget_left()
            if world.main:
                _save(out_dir, state["step"], student, opt, sched, state, keep)
    if not state["done"]:  # the data ran out: the run is over all the same
        state["done"] = True
        if world.main:
            _save(out_dir, state["step"], student, opt, sched, state, keep)
    return state
