"""Retrieval-aware hybrid distillation (Bick et al. 2026, arXiv 2602.11374) and the layer swap (Fig. 7).

Importing this registers ``model_type="gna_hybrid"`` with transformers' Auto classes.
"""
from .adapter import HybridAdapter
from .distill import PAPER_TOKENS, distill
from .modeling import HybridConfig, HybridDecoderLayer, HybridForCausalLM, HybridModel, KeptHeadsAttention
from .student import build_student, heads_from_ranking, random_heads, student_config, to_llamba
from .swap import AttentionLayerShim, align_student, swap_teacher_layer

__all__ = ["PAPER_TOKENS", "AttentionLayerShim", "HybridAdapter", "HybridConfig", "HybridDecoderLayer",
           "HybridForCausalLM", "HybridModel", "KeptHeadsAttention", "align_student", "build_student", "distill",
           "heads_from_ranking", "random_heads", "student_config", "swap_teacher_layer", "to_llamba"]
