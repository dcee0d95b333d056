"""The three MOHAWK stages' losses and the teacher-side hooks they read (goombalab/mohawk
``distill/distill_steps/{matrices,hstates,supervised}.py``; each stage is described in
:mod:`gna.hybrid.distillation`): stage 1 matrix alignment, stage 2 hidden-state alignment, stage 3
end-to-end KL, each over micro-batches and, on several ranks, over the whole batch's denominators.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..patterns.mixing import eager_attention
from ..models import adapter_for
from .study.settings import DISTILLATION



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


def batch_on(b, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    ids, am = (b, None) if isinstance(b, torch.Tensor) else (b["input_ids"], b.get("attention_mask"))
    return ids.to(device), None if am is None else am.to(device)


def _micro_batches(ids: torch.Tensor, am: torch.Tensor | None, size: int | None, sync=None):
    """Rows of the effective batch ids (B, T) in consecutive slices of ``size`` (all at once for None).
    ``sync(last)`` is called before each slice's backward passes, ``last`` True for the last one: a
    sharded student (gna.hybrid.sharding) reduces its gradients over the ranks only then."""
    if size is None or size >= ids.shape[0]:
        parts = [(ids, am)]
    else:
        parts = [(ids[i:i + size], None if am is None else am[i:i + size]) for i in range(0, ids.shape[0], size)]
    for n, part in enumerate(parts):
        if sync is not None:
            sync(n == len(parts) - 1)
        yield part


def _real_tokens(ids: torch.Tensor, am: torch.Tensor | None) -> torch.Tensor:
    """Total weight of the effective batch's tokens (the denominator of stages 2-3's means)."""
    return (torch.ones_like(ids, dtype=torch.float32) if am is None else am.float()).sum()


# --------------------------------------------------------------------------------- losses
# Each stage's loss is a mean over the *effective* batch ids (B, T). With micro-batches, every
# micro-batch backpropagates its share of that mean (its sum over the same denominator), so the
# accumulated gradients are those of the whole batch; with one micro-batch the arithmetic is the
# unchunked one, operation for operation. On several ranks ids is this rank's part of the batch and
# ``whole`` = (rows, real tokens) of the whole batch gives the denominators (gna.hybrid.distributed).

def _stage1(teacher, student, ids, am, micro_batch_size=None, vocab_chunk=None, whole=None, sync=None) -> torch.Tensor:
    layers = student.backbone.layers
    total = 0.0
    for mids, mam in _micro_batches(ids, am, micro_batch_size, sync):
        share = mids.shape[0] / (ids.shape[0] if whole is None else whole[0])  # of the effective batch's mean
        valid = 1.0 if mam is None else (mam[:, None, :, None] * mam[:, None, None, :]).float()

        def align(i, x, A):  # A: teacher layer i's attention (b, H, T, T), freed after this
            nonlocal total
            with torch.enable_grad():
                M = layers[i].input_mixing_matrix(x, mam)                          # (b, H, T, T)
                loss = torch.linalg.matrix_norm((M - A.float()) * valid, ord="fro").mean()
                if share != 1:
                    loss = loss * share
                loss.backward()  # each loss touches layer i only; its graph is freed now
            total += loss.item()

        with torch.no_grad(), _per_layer(teacher, align, attention=True):
            teacher(input_ids=mids, attention_mask=mam, use_cache=False)
    return torch.tensor(total / len(layers))


def _stage2(teacher, student, ids, am, micro_batch_size=None, vocab_chunk=None, whole=None, sync=None) -> torch.Tensor:
    layers = student.backbone.layers
    denominator = _real_tokens(ids, am) if whole is None else whole[1]
    total = 0.0
    for mids, mam in _micro_batches(ids, am, micro_batch_size, sync):
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
                          f"set experiments.{DISTILLATION}.vocab_chunk to null")
    with torch.no_grad():
        h_t = teacher.base_model(input_ids=ids, attention_mask=am, use_cache=False).last_hidden_state
    head_t, head_s = teacher.get_output_embeddings(), student.get_output_embeddings()
    V = head_t.weight.shape[0]
    h_s = student.final_hidden_states(ids, attention_mask=am)                         # (b, T, d), with graph
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


def _stage3(teacher, student, ids, am, micro_batch_size=None, vocab_chunk=None, whole=None, sync=None) -> torch.Tensor:
    denominator = _real_tokens(ids, am) if whole is None else whole[1]
    total = None
    for mids, mam in _micro_batches(ids, am, micro_batch_size, sync):
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


STAGE_LOSSES = {1: _stage1, 2: _stage2, 3: _stage3}
