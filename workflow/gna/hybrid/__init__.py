"""Retrieval-aware hybrid distillation (Bick et al. 2026, arXiv 2602.11374) and the layer swap (Fig. 7).

Importing this registers ``model_type="gna_hybrid"`` with transformers' Auto classes.
Only the model and its adapter load eagerly (they depend on leaf modules alone), so
``gna.models.adapters`` can import :class:`HybridAdapter` without an import cycle; the builders,
distillation and swap helpers load on first use.
"""
from importlib import import_module

from .. import models as _models  # noqa: F401  first: gna.models may import .adapter from here
from .adapter import HybridAdapter
from .modeling import HybridConfig, HybridDecoderLayer, HybridForCausalLM, HybridModel, KeptHeadsAttention

_LAZY = {**dict.fromkeys(["build_student", "heads_from_ranking", "random_heads", "student_config", "to_llamba"],
                         "student"),
         **dict.fromkeys(["PAPER_TOKENS", "distill", "lr_factor", "stage_options", "stage_trainable"],
                         "distillation"),
         **dict.fromkeys(["AttentionLayerShim", "align_student", "swap_teacher_layer"], "swap")}

__all__ = ["HybridAdapter", "HybridConfig", "HybridDecoderLayer", "HybridForCausalLM", "HybridModel",
           "KeptHeadsAttention", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
