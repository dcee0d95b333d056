"""Where a condition starts: the unmodified model's residual stream kept, and handed on to a condition.

A condition (a list of interventions, :mod:`gna.interventions.vocabulary`) first changes some layer
``s``; below it the model computes what the unmodified model computes. :func:`residuals_leaving`
keeps the unmodified model's residual stream leaving each layer ``s - 1``, and :func:`starting_at`
runs the model from there: layers ``0..s-2`` skipped and layer ``s - 1`` handing on the kept stream.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from ..interventions.layers import SkipLayer, replace_layers
from ..models import adapter_for


class HandOn(SkipLayer):
    """Layer ``s - 1`` of a condition that starts at ``s``: ignores its input and hands on the
    unmodified model's residual stream leaving it, ``hidden`` (batch, seq, d_model)."""

    def __init__(self, replaced: nn.Module, hidden: torch.Tensor, as_tuple: bool | int):
        super().__init__(replaced, as_tuple)
        self.hidden = hidden

    def forward(self, hidden_states, *args, **kwargs):
        if hidden_states.shape != self.hidden.shape:
            raise RuntimeError(f"the kept residual {tuple(self.hidden.shape)} does not fit the layer input "
                               f"{tuple(hidden_states.shape)}")
        return super().forward(self.hidden)


@contextmanager
def starting_at(model: nn.Module, start: int, hidden: torch.Tensor | None) -> Iterator[nn.Module]:
    """``model`` with layers ``0..start-2`` skipped and layer ``start - 1`` handing on ``hidden``
    (the unmodified model's residual leaving it, (batch, seq, d_model)); ``start`` 0: unchanged."""
    if start == 0:
        yield model
        return
    adapter = adapter_for(model)
    layers, as_tuple = adapter.layers(), adapter.layer_returns_tuple
    swaps = {i: SkipLayer(layers[i], as_tuple) for i in range(start - 1)}
    swaps[start - 1] = HandOn(layers[start - 1], hidden, as_tuple)
    with replace_layers(model, swaps):
        yield model


class _Enough(Exception):
    """Raised inside the unmodified forward once every wanted residual is kept."""


def residuals_leaving(model: nn.Module, inps: torch.Tensor, starts: list[int]) -> dict[int, torch.Tensor]:
    """{s: the unmodified model's residual stream leaving layer ``s - 1``, (batch, seq, d_model)} for
    each ``s`` > 0 of ``starts``, from one forward of ``inps`` stopped after the last layer wanted."""
    wanted = [s for s in starts if s > 0]
    return residuals_of(model, {"input_ids": inps}, wanted, whole=False)[0] if wanted else {}


@torch.no_grad()
def residuals_of(model: nn.Module, inputs: dict, starts: list[int], whole: bool):
    """({s: the residual stream leaving layer ``s - 1``}, the cache) of one forward of ``model`` as it
    is (the unmodified model, or under a condition) on ``inputs``; stopped after the last layer wanted
    unless ``whole`` (its cache complete)."""
    layers = adapter_for(model).layers()
    wanted = sorted(set(starts))
    got: dict[int, torch.Tensor] = {}
    handles = []
    for s in wanted:
        def keep(module, args, output, s=s):
            got[s] = output[0] if isinstance(output, (tuple, list)) else output
            if len(got) == len(wanted) and not whole:
                raise _Enough

        handles.append(layers[s - 1].register_forward_hook(keep))
    try:
        out = model(**inputs)
    except _Enough:
        out = None
    finally:
        for h in handles:
            h.remove()
    return got, None if out is None else out.past_key_values


def is_truncation(condition: list[dict]) -> bool:
    """Does ``condition`` only cut layers off (it runs no layer past its start)?"""
    return all(next(iter(spec)) == "truncate" for spec in condition)
