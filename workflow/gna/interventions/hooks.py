"""Hook plumbing shared by the interventions: rewrite a mixer's heads on the fly."""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import nn

from ..errors import InterventionError
from ..models.description import Mixer

HeadFn = Callable[[torch.Tensor], torch.Tensor]
"""Maps the heads ``(..., n_heads, head_dim)`` to new heads of the same shape."""


def _kernels_installed() -> bool:
    return any(importlib.util.find_spec(m) is not None for m in ("mamba_ssm", "causal_conv1d"))


def check_hookable(model: nn.Module, mixers: list[Mixer]) -> None:
    """Refuse the one case where hooks silently do nothing.

    With mamba-ssm installed, transformers' Mamba/Mamba-2 training path applies
    ``out_proj`` inside a fused kernel and never calls the module, so its hooks never fire.
    """
    if model.training and any(m.kind in ("mamba1", "mamba2") for m in mixers) and _kernels_installed():
        raise InterventionError(
            "the model is in training mode and mamba-ssm kernels are installed: the fused Mamba path "
            "skips out_proj hooks. Call model.eval() before applying interventions.")


@contextmanager
def during_invocation(invocation: nn.Module | None, on_enter: Callable[[], None],
                      on_leave: Callable[[], None]) -> Iterator[None]:
    """Call ``on_enter`` when ``invocation`` starts its forward and ``on_leave`` when it returns.

    A shared module (Zamba2's attention block, called from several layers) is hooked once for all
    its invocations; an intervention on one invocation acts only between these two calls. With
    ``invocation`` None (an unshared module) nothing is registered.
    """
    if invocation is None:
        yield
        return
    handles = [invocation.register_forward_pre_hook(lambda module, args: on_enter()),
               invocation.register_forward_hook(lambda module, args, output: on_leave())]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def rewrite_heads(mixer: Mixer, fn: HeadFn) -> Iterator[None]:
    """While active, the input of ``mixer.out_proj`` is replaced by ``fn`` of its heads.

    For a shared module invoked from several layers (Zamba2), ``fn`` applies only while
    ``mixer.invocation`` is running, so other invocations are untouched.
    """
    active = [mixer.invocation is None]
    H, D = mixer.n_heads, mixer.head_dim

    def pre_hook(module, args):
        if not active[0]:
            return None
        x = args[0]
        new = fn(x.unflatten(-1, (H, D))).flatten(-2)
        return (new.to(x.dtype),) + tuple(args[1:])

    handle = mixer.out_proj.register_forward_pre_hook(pre_hook)
    try:
        with during_invocation(mixer.invocation, lambda: active.__setitem__(0, True),
                               lambda: active.__setitem__(0, False)):
            yield
    finally:
        handle.remove()
