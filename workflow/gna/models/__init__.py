"""Models: load from a spec, and describe their token mixers uniformly (one adapter per family).

The names below are resolved on first use: the workflow's config checks import
``gna.models.adapters`` when Snakemake parses the Snakefile, and that must not pay for loading
torch and transformers (``gna.models.loading``).
"""
from __future__ import annotations

import importlib

_WHERE = {"ADAPTERS": "adapters", "adapter_for": "adapters", "attach_adapter": "adapters", "attention_only": "adapters", "describe": "adapters",
          "supported_families": "adapters", "KINDS": "description", "Mixer": "description",
          "ModelDescription": "description", "load_model": "loading", "load_tokenizer": "loading",
          "ModelSpec": "spec"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
