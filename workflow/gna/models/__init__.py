"""Models: load from a spec, and describe their token mixers uniformly (one adapter per family)."""
from .adapters import ADAPTERS, adapter_for, attach_adapter, describe, supported_families
from .description import KINDS, Mixer, ModelDescription
from .loading import load_model, load_tokenizer
from .spec import ModelSpec

__all__ = ["ADAPTERS", "KINDS", "Mixer", "ModelDescription", "ModelSpec", "adapter_for", "attach_adapter",
           "describe", "load_model", "load_tokenizer", "supported_families"]
