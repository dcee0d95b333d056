"""The trainer's learning-rate schedule: linear warm-up then cosine decay, restartable per phase.

A schedule is a few numbers and the global step its step 0 sits at (:class:`LRSchedule`), so a
phase that restarts the optimiser starts a fresh one and a checkpoint stores it as a plain dict.
:func:`phase_schedule` takes each number from the phase where it sets one, else from the
:class:`~gna.micro.recipes.TrainConfig`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .recipes import PhaseConfig, TrainConfig


def lr_factor(step: int, cfg: TrainConfig | PhaseConfig | Any) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine to ``min_lr_ratio`` at ``decay_steps``."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.decay_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class LRSchedule:
    """One warm-up + cosine run of the learning rate (a checkpoint keeps it as ``dataclasses.asdict``)."""

    lr: float
    warmup_steps: int
    decay_steps: int
    min_lr_ratio: float
    origin: int          # global step at which this schedule's step 0 is

    def lr_at(self, step: int) -> float:
        return self.lr * lr_factor(step - self.origin, self)


def phase_schedule(cfg: TrainConfig, phase: PhaseConfig | None, origin: int) -> LRSchedule:
    """The schedule that starts at global step ``origin``: ``phase``'s settings over ``cfg``'s."""
    def pick(name):
        v = getattr(phase, name) if phase is not None else None
        return getattr(cfg, name) if v is None else v
    return LRSchedule(pick("lr"), pick("warmup_steps"), pick("decay_steps"), pick("min_lr_ratio"), origin)
