"""Retrieval-aware hybrid distillation (Bick et al. 2026, arXiv 2602.11374) and the layer swap (Fig. 7):
building students from a teacher and its head ranking, the MOHAWK-style stages, the swap.

The student's architecture and adapter are models like any other: :mod:`gna.models.hybrid_student`
and :mod:`gna.models.adapters.hybrid_student`.
"""
from .distillation import distill
from .stage_settings import PAPER_TOKENS, lr_factor, stage_options, stage_trainable
from .student import build_student, heads_from_ranking, random_heads, student_config, to_llamba
from .swap import AttentionLayerShim, align_student, swap_teacher_layer

__all__ = ["PAPER_TOKENS", "AttentionLayerShim", "align_student", "build_student", "distill", "heads_from_ranking",
           "lr_factor", "random_heads", "stage_options", "stage_trainable", "student_config", "swap_teacher_layer",
           "to_llamba"]
