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

    handles = [mixer.out_proj.register_forward_pre_hook(pre_hook)]
    if mixer.invocation is not None:
        def enter(module, args):
            active[0] = True

        def leave(module, args, output):
            active[0] = False

        handles.append(mixer.invocation.register_forward_pre_hook(enter))
        handles.append(mixer.invocation.register_forward_hook(leave))
    try:
        yield
    finally:
        for h in handles:
            h.remove()
