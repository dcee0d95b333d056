"""Find the adapter of a model. One adapter per architecture family, one module per adapter.

Adding a family is adding one module here that defines one :class:`Adapter` subclass (and its
test): the modules are discovered, so the config checks, ``gna.models.tiny`` and the error
messages learn the family from it. Importing this package needs no torch (the workflow's config
checks use it when Snakemake parses the Snakefile).
"""
from __future__ import annotations

import importlib
import pkgutil
import weakref
from typing import TYPE_CHECKING

from ...errors import ConfigError, UnknownArchitectureError
from .base import Adapter

if TYPE_CHECKING:
    from torch import nn


def _discover() -> tuple[type[Adapter], ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [c for c in vars(module).values()
                  if isinstance(c, type) and issubclass(c, Adapter) and c.__module__ == module.__name__]
    # The specific families (matched by model type) first, the structural fallback last.
    return tuple(sorted(found, key=lambda a: a.fallback))


ADAPTERS: tuple[type[Adapter], ...] = _discover()
FAMILIES: tuple[str, ...] = tuple(a.family for a in ADAPTERS)
_attached: "weakref.WeakKeyDictionary[nn.Module, Adapter]" = weakref.WeakKeyDictionary()


def supported_families() -> str:
    shown = sorted(ADAPTERS, key=lambda a: not a.fallback)  # the general family first
    return "; ".join(f"{a.family} ({a.examples})" for a in shown)


def adapter_of_family(family: str) -> type[Adapter]:
    for a in ADAPTERS:
        if a.family == family:
            return a
    raise UnknownArchitectureError(f"unknown model family {family!r}; supported families: {supported_families()}")


def adapter_of_config(cfg: dict, family: str | None = None) -> type[Adapter] | None:
    """The adapter of a config.json (a dict; ``family`` forces one), or None where none matches."""
    if family is not None:
        return adapter_of_family(family)
    return next((a for a in ADAPTERS if a.matches_config(cfg)), None)


def builder_of(name: str) -> type[Adapter]:
    """The adapter that can build a tiny ``name`` model (``llama``, ``qwen2``, ``falcon-mamba``, ...)."""
    for a in ADAPTERS:
        if name in a.builds:
            return a
    raise ConfigError(f"no tiny config for family {name!r}; known: {', '.join(n for a in ADAPTERS for n in a.builds)}")


def _arch(model: nn.Module) -> str:
    arch = getattr(model.config, "architectures", None) or [type(model).__name__]
    return f"{arch[0]} (model_type {getattr(model.config, 'model_type', '?')!r})"


def attach_adapter(model: nn.Module, family: str | None = None, **options) -> Adapter:
    """Pick (or force) the adapter of ``model``, remember it, and return it."""
    depth = [k for k in ("num_hidden_layers", "n_layer") if getattr(model.config, k, None) == 0]
    if depth:  # no layers is no architecture's shape: say what is wrong, not "unsupported"
        raise UnknownArchitectureError(f"{_arch(model)} has {depth[0]} = 0 in its config: a model without layers "
                                       f"has no token mixers to describe")
    if family is not None:
        forced = adapter_of_family(family)
        if forced.refusal(model):  # a forced family must still fit (Falcon-H1 forced to "attention")
            raise UnknownArchitectureError(
                f"{_arch(model)} cannot be described as family {family!r}: {forced.refusal(model)}; "
                f"supported families: {supported_families()}")
        found = [forced]
    else:
        from ..refused import refusal_of

        # A family refused by name is refused even where the structural fallback would take it (its
        # layers look like attention, but what they do is not what the adapter would describe).
        named = refusal_of(getattr(model.config, "model_type", None))
        found = [] if named else [a for a in ADAPTERS if a.matches(model)]
        if not found:
            reasons = "".join(f": {r}" for r in ([named] if named else []) +
                              sorted({a.refusal(model) for a in ADAPTERS} - {None}))
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


def attention_only(model: nn.Module) -> bool:
    """Are all of ``model``'s token mixers attention (False for a model no adapter describes)? The
    shortcuts that reuse a context's keys and values (shared contexts, packed rows) need it."""
    try:
        mixers = describe(model).mixers
    except Exception:  # noqa: BLE001 - a model the adapters do not know
        return False
    return bool(mixers) and all(m.kind == "attention" for m in mixers)
