"""Mask one query row of heads: the answer position can no longer read the context through them.

The official Zamba2 experiment (goombalab/Gather-and-Aggregate, models/modeling_zamba2.py, the
model's ``mask_last_row``) zeroes ``attn_weights[b, :, last_b, :]`` after the softmax, for every
head of every invocation of the shared attention block, where ``last_b`` is the last non-padding
position of row ``b`` (``(input_ids != 0).sum(1) - 1``: lm-eval pads with zeros on the right).
A zero softmax row makes that head's output at that position zero and changes nothing else, so
the same intervention is a hook on the output projection's input: ``x[b, last_b, h, :] = 0``.
That form works with any attention implementation (sdpa, flash, eager) and with SSM heads too,
and never touches a weight.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Iterable, Iterator

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


@contextmanager
def mask_last_row(model: nn.Module, heads: Iterable | str = "all", position: str = "last",
                  pad_id: int = 0) -> Iterator[nn.Module]:
    """While active, ``heads`` contribute nothing at each row's answer position.

    ``heads``: ``"all"`` (every attention head of every attention mixer; for Zamba2 every
    invocation of the shared block, as the official code) or ``(layer, head[, kind])`` refs.
    ``position``: ``"last"``, the last real token (where the next-token answer is read).
    Earlier positions, other heads and every SSM are untouched; the model is bit-identical
    afterwards (hooks only).
    """
    if position not in POSITIONS:
        raise InterventionError(f"position {position!r} is not one of {POSITIONS}")
    desc = adapter_for(model).describe()
    if isinstance(heads, str):
        if heads != "all":
            raise InterventionError(f"heads must be 'all' or a list of (layer, head[, kind]); got {heads!r}")
        grouped = {m: list(range(m.n_heads)) for m in desc.mixers if m.kind == "attention"}
        if not grouped:
            raise InterventionError(f"{type(model).__name__} has no attention mixer whose last row could be masked")
    else:
        grouped = _group(model, heads)
    check_hookable(model, list(grouped))
    inputs: list = []   # (input_ids, attention_mask) of the forward call running now

    def capture(module, args, kwargs):
        ids = kwargs.get("input_ids")
        inputs[:] = [ids if ids is not None else (args[0] if args else None), kwargs.get("attention_mask")]

    with ExitStack() as stack:
        handle = model.register_forward_pre_hook(capture, with_kwargs=True)
        stack.callback(handle.remove)
        for mixer, idx in grouped.items():
            index = torch.tensor(sorted(set(idx)))

            def fn(x, index=index):
                """x: (B, T, n_heads, head_dim); zero [b, last_b, index, :]."""
                if not inputs:
                    raise InterventionError("mask_last_row: the model's forward was not called with its inputs")
                last = last_positions(*inputs, pad_id=pad_id, length=x.shape[1]).to(x.device)
                if x.ndim != 4 or last.shape[0] != x.shape[0]:
                    raise InterventionError(f"mask_last_row expects (batch, T, heads, dim) with batch "
                                            f"{last.shape[0]}; got {tuple(x.shape)}")
                keep = torch.ones(x.shape[:3], dtype=torch.bool, device=x.device)      # (B, T, H)
                keep[torch.arange(x.shape[0], device=x.device)[:, None], last[:, None], index[None, :]] = False
                return x.masked_fill(~keep[..., None], 0)
            stack.enter_context(rewrite_heads(mixer, fn))
        yield model
