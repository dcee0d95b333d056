"""MOHAWK-style distillation of the hybrid student, stage by stage, with atomic resumable checkpoints.

Stages (goombalab/mohawk ``distill/distill_steps/{matrices,hstates,supervised}.py``):

1. per layer, on the teacher's own layer input ``x_l``: the student mixer's materialised matrix
   against the teacher's attention weights, ``||M_s - A_t||_F`` per (sample, head), mean, summed
   over layers (``matrices.py``). Only the SSM mixers train.
2. per layer, on ``x_l``: the student layer's output against the teacher layer's output,
   ``||h_s - h_t||_2`` per token, mean, summed over layers (``hstates.py``). The mixers, kept
   attention heads and the adapter train; MLPs and norms (copied from the teacher) stay frozen,
   as in phi-mamba's ``assets/mohawk_stage2.py``.
3. end to end: ``KL(teacher || student)`` of the next-token distributions, mean over tokens
   (``supervised.py`` uses the cross-entropy to the teacher's softmax: same gradient). Everything trains.

Checkpoints: ``out_dir/step-XXXXXXXX/`` (student weights, optimizer, scheduler, RNG, state.json)
written through :func:`gna.io.atomic_path`, so a directory of that name is always complete;
the newest ``keep`` are kept. A rerun with ``resume=True`` continues from the newest one (a run
killed mid-write leaves only a hidden ``.step-*.tmp`` directory, removed on the next run) and ends
with the same weights, bit for bit on the CPU, as an uninterrupted run: the data stream is
replayed from the right step and all training state (weights, AdamW moments and step counts,
scheduler, torch RNG) is restored exactly. A checkpoint written with other hyperparameters is
refused rather than mixed in. ``seed`` seeds torch at a fresh start; the data order is the caller's.
"""
from __future__ import annotations

import json
import re
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..io import atomic_path
from ..mixing import eager_attention
from ..models import adapter_for

PAPER_TOKENS = {1: 3e8, 2: 5e9, 3: 2e10}  # the follow-up's budgets (mohawk configs' n_tokens)
_TRAINABLE = {1: (r"\.mixer\.",), 2: (r"\.mixer\.", r"\.attn\.", r"\.adapter\."), 3: (r"",)}
_CKPT = re.compile(r"^step-(\d{8})$")


# --------------------------------------------------------------------------------- teacher side

@contextmanager
def _record(teacher: nn.Module, want_weights: bool):
    """Record each teacher layer's input and output (and attention weights) during a forward."""
    layers = adapter_for(teacher).layers()
    rec = {"in": [None] * len(layers), "out": [None] * len(layers), "attn": [None] * len(layers)}
    with ExitStack() as stack:
        for i, layer in enumerate(layers):
            def pre(m, args, kwargs, i=i):
                rec["in"][i] = args[0] if args else kwargs["hidden_states"]

            def post(m, args, kwargs, out, i=i):
                rec["out"][i] = out[0] if isinstance(out, tuple) else out

            handles = [layer.register_forward_pre_hook(pre, with_kwargs=True),
                       layer.register_forward_hook(post, with_kwargs=True)]
            if want_weights:
                handles.append(layer.self_attn.register_forward_hook(
                    lambda m, a, out, i=i: rec["attn"].__setitem__(i, out[1])))
            for h in handles:
                stack.callback(h.remove)
        if want_weights:
            stack.enter_context(eager_attention(teacher))
        yield rec


def _batch(b, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    ids, am = (b, None) if isinstance(b, torch.Tensor) else (b["input_ids"], b.get("attention_mask"))
    return ids.to(device), None if am is None else am.to(device)


# --------------------------------------------------------------------------------- losses

def _stage1(teacher, student, ids, am) -> torch.Tensor:
    with torch.no_grad(), _record(teacher, want_weights=True) as rec:
        teacher(input_ids=ids, attention_mask=am, use_cache=False)
    valid = 1.0 if am is None else (am[:, None, :, None] * am[:, None, None, :]).float()
    total = 0.0
    for layer, x, A in zip(student.backbone.layers, rec["in"], rec["attn"]):
        M = layer.mixer.mixing_matrix(layer.input_layernorm(x), am)       # (B, H, T, T)
        loss = torch.linalg.matrix_norm((M - A.float()) * valid, ord="fro").mean()
        loss.backward()  # per layer: each loss touches one layer only, and frees its graph now
        total += loss.item()
    return torch.tensor(total / len(rec["in"]))


def _stage2(teacher, student, ids, am) -> torch.Tensor:
    with torch.no_grad(), _record(teacher, want_weights=False) as rec:
        teacher(input_ids=ids, attention_mask=am, use_cache=False)
    w = torch.ones_like(ids, dtype=torch.float32) if am is None else am.float()
    total = 0.0
    for layer, x, y in zip(student.backbone.layers, rec["in"], rec["out"]):
        dist = (layer(x, attention_mask=am) - y).float().norm(dim=-1)   # (B, T)
        loss = (dist * w).sum() / w.sum()
        loss.backward()
        total += loss.item()
    return torch.tensor(total / len(rec["in"]))


def _stage3(teacher, student, ids, am) -> torch.Tensor:
    with torch.no_grad():
        t = teacher(input_ids=ids, attention_mask=am, use_cache=False).logits.float()
    s = student(input_ids=ids, attention_mask=am).logits[..., :t.shape[-1]].float()
    p = F.log_softmax(t, -1)
    kl = (p.exp() * (p - F.log_softmax(s, -1))).sum(-1)                # (B, T)
    w = torch.ones_like(kl) if am is None else am.float()
    loss = (kl * w).sum() / w.sum()
    loss.backward()
    return loss.detach()


_STEP = {1: _stage1, 2: _stage2, 3: _stage3}


# --------------------------------------------------------------------------------- checkpoints

def _checkpoints(out_dir: Path) -> list[tuple[int, Path]]:
    found = [(int(m[1]), p) for p in out_dir.glob("step-*") if p.is_dir() and (m := _CKPT.match(p.name))]
    return sorted(found)


def _save(out_dir: Path, step: int, student, opt, sched, state: dict, keep: int) -> None:
    with atomic_path(out_dir / f"step-{step:08d}", directory=True) as tmp:
        torch.save(student.state_dict(), tmp / "student.pt")
        torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "rng": torch.get_rng_state()}, tmp / "trainer.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
    for _, old in _checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _load(path: Path, student, opt, sched) -> dict:
    student.load_state_dict(torch.load(path / "student.pt", weights_only=True))
    trainer = torch.load(path / "trainer.pt", weights_only=True)
    opt.load_state_dict(trainer["optimizer"])
    sched.load_state_dict(trainer["scheduler"])
    torch.set_rng_state(trainer["rng"])
    return json.loads((path / "state.json").read_text())


# --------------------------------------------------------------------------------- the loop

def distill(teacher: nn.Module, student: nn.Module, stage: int, data_iter, steps: int, lr: float, out_dir,
            resume: bool = True, *, max_tokens: float | None = None, seed: int = 0, save_every: int = 50,
            keep: int = 2, trainable: Callable[[str], bool] | None = None, grad_clip: float | None = 1.0,
            weight_decay: float = 0.0, warmup: int = 0) -> dict:
    """Train ``student`` (in place) on stage 1, 2 or 3 for ``steps`` optimizer steps.

    ``data_iter``: a callable ``step -> batch`` (random access: resuming reads from the step it
    stopped at), or a re-iterable (list, DataLoader without shuffling) replayed from its start and
    skipped to the step. A batch is ``input_ids (B, T)`` or a dict with ``input_ids`` and
    optionally ``attention_mask``. ``max_tokens``: stop early once that many (real) tokens were seen.
    ``trainable(name)`` overrides the stage's parameter set. Returns the run's state: ``step``,
    ``tokens``, per-step ``losses`` (stage loss per layer for 1-2, KL for 3), ``resumed_from``.
    """
    if stage not in _STEP:
        raise ConfigError(f"stage {stage!r} is not 1 (matrices), 2 (hidden states) or 3 (logits)")
    out_dir = Path(out_dir)
    if trainable is None:
        pats = [re.compile(p) for p in _TRAINABLE[stage]]
        trainable = lambda name: any(p.search(name) for p in pats)  # noqa: E731
    names = [n for n, _ in student.named_parameters() if trainable(n)]
    if not names:
        raise ConfigError(f"stage {stage}: no trainable parameters in {type(student).__name__}")
    fingerprint = dict(stage=stage, lr=lr, seed=seed, weight_decay=weight_decay, grad_clip=grad_clip,
                       warmup=warmup, n_trainable=len(names))
    with _training(student, set(names)):
        return _run(teacher, student, stage, data_iter, steps, lr, out_dir, resume, max_tokens, seed, save_every,
                    keep, grad_clip, weight_decay, warmup, fingerprint)


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
         grad_clip, weight_decay, warmup, fingerprint) -> dict:
    params = [p for p in student.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)

    def budget_left() -> bool:
        return state["step"] < steps and (max_tokens is None or state["tokens"] < max_tokens)

    state = dict(fingerprint=fingerprint, step=0, tokens=0, losses=[], done=False, resumed_from=0)
    found = _checkpoints(out_dir) if out_dir.is_dir() else []
    for stale in out_dir.glob(".step-*.tmp"):  # a save killed mid-write (never a checkpoint)
        shutil.rmtree(stale, ignore_errors=True)
    if found and resume:
        state = _load(found[-1][1], student, opt, sched)
        if state["fingerprint"] != fingerprint:
            raise ConfigError(f"{found[-1][1]} was written with {state['fingerprint']}, this run is {fingerprint}: "
                              "delete the folder or pass resume=False")
        state["resumed_from"] = state["step"]
        state["done"] = not budget_left()  # a finished run asked for more steps goes on
    else:
        for _, old in found:
            shutil.rmtree(old)
        torch.manual_seed(seed)

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
        opt.zero_grad(set_to_none=True)
        loss = _STEP[stage](teacher, student, ids, am)
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        sched.step()
        state["step"] += 1
        state["tokens"] += int(ids.numel() if am is None else am.sum())
        state["losses"].append(float(loss))
        if state["step"] % save_every == 0 or not budget_left():
            state["done"] = not budget_left()
            _save(out_dir, state["step"], student, opt, sched, state, keep)
    if not state["done"]:  # the data ran out: the run is over all the same
        state["done"] = True
        _save(out_dir, state["step"], student, opt, sched, state, keep)
    return state
