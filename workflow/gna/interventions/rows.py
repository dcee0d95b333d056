"""Mask query rows of heads: at those positions the heads can no longer read the context.

The official Zamba2 experiment (goombalab/Gather-and-Aggregate, models/modeling_zamba2.py, the
model's ``mask_last_row``) zeroes ``attn_weights[b, :, last_b, :]`` after the softmax, for every
head of every invocation of the shared attention block, where ``last_b`` is the last non-padding
position of row ``b`` (``(input_ids != 0).sum(1) - 1``: lm-eval pads with zeros on the right).
A zero softmax row makes that head's output at that position zero and changes nothing else, so
the same intervention is a hook on the output projection's input: ``x[b, last_b, h, :] = 0``.
That form works with any attention implementation (sdpa, flash, eager) and with SSM heads too
(the row of the head's mixing matrix, D skip included), and never touches a weight.

:func:`mask_head_rows` is the general form (any head set, any positions, given per forward);
:func:`mask_last_row` the official one; :mod:`gna.experiments.row_sweep` sweeps named position
sets of a multiple-choice prompt.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Callable, Iterable, Iterator

import torch
from torch import nn

from ..errors import InterventionError
from ..models import adapter_for
from .head_ablation import _group
from .hooks import check_hookable, rewrite_heads

POSITIONS = ("last",)


def last_positions(input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None = None,
                   pad_id: int = 0, length: int | None = None) -> torch.Tensor:
    """``(B,)`` index, within the current input of ``length`` tokens, of each row's last real token.

    From ``input_ids (B, T)`` when given: the last token that is not ``pad_id`` (lm-eval pads
    log-likelihood batches on the right with 0, which the official code relies on; the last such
    token, not the count, so a pad id inside the text cannot move it). Otherwise from a 2-D
    ``attention_mask``: during cached generation it covers past tokens too, so only its last
    ``length`` columns describe the current input. A row of padding only gets position 0.
    """
    if input_ids is not None and (length is None or input_ids.shape[1] == length):
        real = input_ids != pad_id
    elif attention_mask is not None and attention_mask.ndim == 2:
        real = attention_mask[:, -length:].bool() if length is not None else attention_mask.bool()
    else:
        raise InterventionError("masking the last row needs input_ids or a 2-D attention_mask in the forward "
                                "call (inputs_embeds alone do not say where padding starts)")
    T = real.shape[1]
    index = torch.arange(T, device=real.device).expand_as(real)
    return torch.where(real, index, torch.zeros_like(index)).amax(dim=1)


HEAD_SETS = ("all", "attention", "ssm")


def head_set(model: nn.Module, heads: Iterable | str) -> dict:
    """``{mixer: [head, ...]}`` of ``heads``: ``"all"`` or ``"attention"`` (every attention head of
    every attention mixer; for Zamba2 every invocation of the shared block, as the official code),
    ``"ssm"`` (every head of every other mixer), or ``(layer, head[, kind])`` refs."""
    if not isinstance(heads, str):
        return _group(model, heads)
    if heads not in HEAD_SETS:
        raise InterventionError(f"heads must be one of {HEAD_SETS} or a list of (layer, head[, kind]); got {heads!r}")
    attention = heads in ("all", "attention")
    grouped = {m: list(range(m.n_heads)) for m in adapter_for(model).describe().mixers
               if (m.kind == "attention") == attention}
    if not grouped:
        raise InterventionError(f"{type(model).__name__} has no {'attention' if attention else 'SSM'} mixer "
                                "whose rows could be masked")
    return grouped


@contextmanager
def mask_head_rows(model: nn.Module, heads: Iterable | str, positions: Callable[[int, int], torch.Tensor]
                   ) -> Iterator[nn.Module]:
    """While active, ``heads`` (see :func:`head_set`) output nothing at the positions
    ``positions(B, T)`` marks: a ``(B, T)`` bool tensor (True = masked) for the current forward's
    batch of ``B`` rows of ``T`` tokens. Other positions and heads are untouched; hooks only."""
    grouped = head_set(model, heads)
    check_hookable(model, list(grouped))
    with ExitStack() as stack:
        for mixer, idx in grouped.items():
            index = torch.tensor(sorted(set(idx)))

            def fn(x, index=index):
                """x: (B, T, n_heads, head_dim); zero [b, t, index, :] where positions(B, T)[b, t]."""
                if x.ndim != 4:
                    raise InterventionError(f"row masking expects (batch, T, heads, dim); got {tuple(x.shape)}")
                masked = positions(x.shape[0], x.shape[1]).to(x.device)
                if masked.shape != x.shape[:2]:
                    raise InterventionError(f"row mask of shape {tuple(masked.shape)} for a (batch, T) of "
                                            f"{tuple(x.shape[:2])}")
                drop = torch.zeros(x.shape[:3], dtype=torch.bool, device=x.device)      # (B, T, H)
                drop[:, :, index.to(x.device)] = masked[:, :, None]
                return x.masked_fill(drop[..., None], 0)
            stack.enter_context(rewrite_heads(mixer, fn))
        yield model


@contextmanager
def mask_last_row(model: nn.Module, heads: Iterable | str = "all", position: str = "last",
                  pad_id: int = 0) -> Iterator[nn.Module]:
    """While active, ``heads`` contribute nothing at each row's answer position.

    ``heads``: ``"all"`` (every attention head of every attention mixer; for Zamba2 every
    invocation of the shared block, as the official code) or ``(layer, head[, kind])`` refs
    (:func:`head_set`). ``position``: ``"last"``, the last real token (where the next-token answer
    is read). Earlier positions, other heads and every SSM are untouched; the model is
    bit-identical afterwards (hooks only).
    """
    if position not in POSITIONS:
        raise InterventionError(f"position {position!r} is not one of {POSITIONS}")
    if isinstance(heads, str) and heads != "all":
        raise InterventionError(f"heads must be 'all' or a list of (layer, head[, kind]); got {heads!r}")
    inputs: list = []   # (input_ids, attention_mask) of the forward call running now

    def capture(module, args, kwargs):
        ids = kwargs.get("input_ids")
        inputs[:] = [ids if ids is not None else (args[0] if args else None), kwargs.get("attention_mask")]

    def last_row(B: int, T: int) -> torch.Tensor:
        if not inputs:
            raise InterventionError("mask_last_row: the model's forward was not called with its inputs")
        last = last_positions(*inputs, pad_id=pad_id, length=T)
        if last.shape[0] != B:
            raise InterventionError(f"mask_last_row expects a batch of {last.shape[0]}; got {B}")
        return torch.arange(T, device=last.device)[None, :] == last[:, None]

    with ExitStack() as stack:
        handle = model.register_forward_pre_hook(capture, with_kwargs=True)
        stack.callback(handle.remove)
        stack.enter_context(mask_head_rows(model, heads, last_row))
        yield model
