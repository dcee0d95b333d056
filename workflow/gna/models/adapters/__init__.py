"""Find the adapter for a model. One adapter per architecture family."""
from __future__ import annotations

import weakref

from torch import nn

from ...errors import UnknownArchitectureError
from .attention import AttentionAdapter
from .base import Adapter
from .falcon_h1 import FalconH1Adapter
from .gpt2 import GPT2Adapter
from .granitemoehybrid import GraniteMoeHybridAdapter
from .hybrid_student import HybridAdapter
from .jamba import JambaAdapter
from .llamba import LlambaAdapter
from .phi import PhiAdapter
from .mamba1 import Mamba1Adapter
from .mamba2 import Mamba2Adapter
from .zamba2 import Zamba2Adapter

# Order matters: the specific families first, the structural attention match last.
ADAPTERS: tuple[type[Adapter], ...] = (Mamba1Adapter, Mamba2Adapter, Zamba2Adapter, LlambaAdapter,
                                       HybridAdapter, JambaAdapter, FalconH1Adapter, GraniteMoeHybridAdapter,
                                       GPT2Adapter, PhiAdapter, AttentionAdapter)
_attached: "weakref.WeakKeyDictionary[nn.Module, Adapter]" = weakref.WeakKeyDictionary()


def supported_families() -> str:
    shown = (AttentionAdapter,) + ADAPTERS[:-1]  # the general family first
    return "; ".join(f"{a.family} ({a.examples})" for a in shown)


def _arch(model: nn.Module) -> str:
    arch = getattr(model.config, "architectures", None) or [type(model).__name__]
    return f"{arch[0]} (model_type {getattr(model.config, 'model_type', '?')!r})"


def attach_adapter(model: nn.Module, family: str | None = None, **options) -> Adapter:
    """Pick (or force) the adapter of ``model``, remember it, and return it."""
    if family is not None:
        found = [a for a in ADAPTERS if a.family == family]
        if not found:
            raise UnknownArchitectureError(
                f"unknown model family {family!r}; supported families: {supported_families()}")
        if found[0].refusal(model):  # a forced family must still fit (Falcon-H1 forced to "attention")
            raise UnknownArchitectureError(
                f"{_arch(model)} cannot be described as family {family!r}: {found[0].refusal(model)}; "
                f"supported families: {supported_families()}")
    else:
        found = [a for a in ADAPTERS if a.matches(model)]
        if not found:
            reasons = "".join(f": {r}" for r in {a.refusal(model) for a in ADAPTERS} - {None})
            raise UnknownArchitectureError(
                f"unsupported architecture {_arch(model)}{reasons}; supported families: {supported_families()}")
    adapter = found[0](model, **options)
    try:  # a layer the adapter does not understand fails at load, not mid-experiment (nothing cached)
        adapter.mixers()
    except UnknownArchitectureError as e:
        raise UnknownArchitectureError(f"unsupported architecture {_arch(model)}: {e}; supported families: "
                                       f"{supported_families()}") from None
    _attached[model] = adapter
    return adapter


def adapter_for(model: nn.Module) -> Adapter:
    """The adapter attached to ``model`` (by :func:`load_model`), or a freshly detected one."""
    return _attached.get(model) or attach_adapter(model)


def describe(model: nn.Module):
    """The uniform mixer description of ``model`` (see :class:`ModelDescription`)."""
    return adapter_for(model).describe()
