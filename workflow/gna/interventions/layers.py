"""Layer interventions: truncate, drop one layer, swap a layer in, start mid-stack.

They swap entries of the decoder-layer list for the duration of the context and put the
original modules back afterwards; no parameter is modified. Every supported family's
decoder layer takes the hidden states as its first argument and returns them as a tensor, or
as ``(hidden,)`` where the adapter says so (``layer_returns_tuple``: Falcon-H1, whose model loop
reads ``layer(...)[0]``), which is what :class:`SkipLayer` relies on.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from ..errors import InterventionError, LayerIndexError
from ..models import adapter_for

_LAYER_ATTRS = ("attention_type", "layer_type", "layer_idx", "is_sliding", "block_type")


class SkipLayer(nn.Module):
    """Identity in place of a decoder layer: returns the hidden states it is given."""

    def __init__(self, replaced: nn.Module | None = None, as_tuple: bool | int = False):
        super().__init__()
        # A model whose loop indexes the layer output ([0]) would take row 0 of a bare tensor;
        # one that unpacks it (Bamba: hidden, attention weights) needs as many items (the rest None).
        self.as_tuple = int(as_tuple)
        for a in _LAYER_ATTRS:  # the model's loop may read these off each layer
            if replaced is not None and hasattr(replaced, a):
                setattr(self, a, getattr(replaced, a))

    def forward(self, hidden_states, *args, **kwargs):
        return (hidden_states,) + (None,) * (self.as_tuple - 1) if self.as_tuple else hidden_states


def _skip(model: nn.Module, layer: int) -> SkipLayer:
    adapter = adapter_for(model)
    return SkipLayer(adapter.layers()[layer], as_tuple=adapter.layer_returns_tuple)


@contextmanager
def replace_layers(model: nn.Module, replacements: dict[int, nn.Module]) -> Iterator[nn.Module]:
    """Put ``replacements[i]`` at position ``i`` of the layer list; restore on exit."""
    layers = adapter_for(model).layers()
    desc = adapter_for(model).describe()
    for i in replacements:
        desc.check_layer(i)
    originals = {i: layers[i] for i in replacements}
    try:
        for i, new in replacements.items():
            layers[i] = new
        yield model
    finally:
        for i, old in originals.items():
            layers[i] = old


def truncate(model: nn.Module, n_layers: int):
    """Keep layers ``0..n_layers-1``; embedding, final norm and LM head are reused (Fig. 2)."""
    total = adapter_for(model).describe().n_layers
    if not isinstance(n_layers, int) or not 1 <= n_layers <= total:
        raise LayerIndexError(f"cannot truncate to {n_layers!r} layers: the model has {total} (keep 1..{total})")
    return replace_layers(model, {i: _skip(model, i) for i in range(n_layers, total)})


def drop_layer(model: nn.Module, layer: int):
    """Remove one layer (Fig. 3's individual layer pruning)."""
    adapter_for(model).describe().check_layer(layer)
    return replace_layers(model, {layer: _skip(model, layer)})


def swap_layer(model: nn.Module, layer: int, new_layer: nn.Module):
    """Run ``new_layer`` (e.g. a teacher's decoder layer, wrapped to accept this model's
    call signature) in place of layer ``layer`` (Fig. 7's layer swap)."""
    if not isinstance(new_layer, nn.Module):
        raise InterventionError(f"swap_layer needs an nn.Module, got {type(new_layer).__name__}")
    return replace_layers(model, {layer: new_layer})


@contextmanager
def start_at_layer(model: nn.Module, layer: int, hidden: torch.Tensor) -> Iterator[nn.Module]:
    """Skip layers ``0..layer-1`` and feed ``hidden`` into layer ``layer`` instead.

    ``hidden``: ``(batch, seq, d_model)``, the residual stream entering ``layer`` (from
    :func:`capture_layer_inputs`); the input ids still go in, for embeddings-dependent parts
    (Zamba2's shared block reads the embeddings) and masks.
    """
    layers = adapter_for(model).layers()
    adapter_for(model).describe().check_layer(layer)

    def feed(module, args, kwargs):
        if args:
            if args[0].shape != hidden.shape:
                raise InterventionError(f"start_at_layer: hidden {tuple(hidden.shape)} does not match the "
                                        f"layer input {tuple(args[0].shape)}")
            return (hidden,) + tuple(args[1:]), kwargs
        return args, {**kwargs, "hidden_states": hidden}

    handle = layers[layer].register_forward_pre_hook(feed, with_kwargs=True)
    try:
        with replace_layers(model, {i: _skip(model, i) for i in range(layer)}):
            yield model
    finally:
        handle.remove()


class _Captured(Exception):
    """Raised inside the forward once every wanted input is captured: the rest is not needed."""


@torch.no_grad()
def capture_layer_inputs(model: nn.Module, layers_wanted, **inputs) -> dict[int, torch.Tensor]:
    """Run the model only as far as needed; return the residual stream entering each layer
    of ``layers_wanted`` (``(batch, seq, d_model)`` each)."""
    layers = adapter_for(model).layers()
    desc = adapter_for(model).describe()
    wanted = sorted({desc.check_layer(i) for i in layers_wanted})
    got: dict[int, torch.Tensor] = {}
    handles = []
    for i in wanted:
        def grab(module, args, kwargs, i=i):
            got[i] = args[0] if args else kwargs["hidden_states"]
            if len(got) == len(wanted):
                raise _Captured

        handles.append(layers[i].register_forward_pre_hook(grab, with_kwargs=True))
    try:
        model(**inputs)
    except _Captured:
        pass
    finally:
        for h in handles:
            h.remove()
    return got
