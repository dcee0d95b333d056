"""What each MOHAWK stage trains and how: the trainable parameters per stage, the learning-rate
schedules (constant, warmup-stable-decay, cosine), AdamW's parameter groups, and a run's settings
for one stage (:func:`stage_options`). The loop that uses them is :mod:`gna.hybrid.distillation`.
"""
from __future__ import annotations

import math
import re
from typing import Callable

from torch import nn

from ..errors import ConfigError

PAPER_TOKENS = {1: 3e8, 2: 5e9, 3: 2e10}  # the follow-up's budgets (mohawk configs' n_tokens)
DEFAULT_TRAINABLE = {1: (r"\.mixer\.",), 2: (r"\.mixer\.", r"\.attn\.", r"\.adapter\."), 3: (r"",)}
STAGE_TRAINABLE = {1: {"mixers": DEFAULT_TRAINABLE[1], "all": (r"",)},
                   2: {"mixers": DEFAULT_TRAINABLE[2], "all": (r"",)}}
SCHEDULES = ("constant", "wsd", "cosine")


def stage_trainable(stage: int, which: str | None) -> Callable[[str], bool] | None:
    """The ``trainable`` override of stage 1 or 2: ``which`` = ``"mixers"`` (the default: stage 1 the
    SSM mixers; stage 2 the SSM mixers, kept attention heads, adapter) or ``"all"`` (every parameter,
    goombalab/mohawk's: its ``configs/Llama/1B/bases/_{matrices,hstates}.yaml`` leave
    ``optimize_weights`` black/white lists null, so ``distill/utils.py::setup_gradients`` sets
    ``requires_grad`` on every parameter; what takes no part in the stage's per-layer loss, e.g. the
    embedding, final norm and LM head, gets no gradient and so is not stepped, not even decayed).
    None: the stage's default set."""
    if which is None:
        return None
    if stage not in STAGE_TRAINABLE:
        raise ConfigError(f"stage{stage}_trainable: only stages 1 and 2 have a choice, not stage {stage}")
    if which not in STAGE_TRAINABLE[stage]:
        raise ConfigError(f"stage{stage}_trainable={which!r} is not 'mixers' or 'all'")
    pats = [re.compile(p) for p in STAGE_TRAINABLE[stage][which]]
    return lambda name: any(p.search(name) for p in pats)


def _schedule_steps(value, total: int) -> int:
    """mohawk's ``distill/utils.py::setup_scheduler``: a value in (0, 1) is that fraction of the
    steps (rounded down), anything else a number of steps."""
    value = float(value or 0)
    return int(value * total) if 0 < value < 1 else int(value)


def lr_factor(step: int, total: int, lr: float, schedule: dict) -> float:
    """The learning rate of optimizer step ``step`` (0-based) of ``total``, as a factor of ``lr``.

    ``schedule``: ``{name, warmup, decay, warmup_start_lr, min_lr}`` (warmup/decay: fractions in
    (0, 1) or steps). Names:

    - ``wsd``: goombalab/mohawk ``utils/wsd_scheduler.py::lr_wsd_lambda`` (phase "entire", linear
      decay): linear from ``warmup_start_lr`` (at step 0) to ``lr`` over ``warmup`` steps, flat, then
      linear from ``lr`` to ``min_lr`` over the last ``decay`` steps (``min_lr`` after them);
    - ``cosine``: the closed form of pl_bolts' ``LinearWarmupCosineAnnealingLR``, mohawk's other
      scheduler: linear from ``warmup_start_lr`` to ``lr`` over ``warmup`` steps (``lr`` at step
      ``warmup - 1``), then a half cosine from ``lr`` down to ``min_lr`` at ``total``;
    - ``constant``: ``lr`` throughout (after the same linear warm-up, if any).
    """
    name = schedule.get("name", "wsd")
    if name not in SCHEDULES:
        raise ConfigError(f"schedule {name!r} is not one of {', '.join(SCHEDULES)}")
    warmup, decay = _schedule_steps(schedule.get("warmup"), total), _schedule_steps(schedule.get("decay"), total)
    start, low = float(schedule.get("warmup_start_lr", 0.0)), float(schedule.get("min_lr", 0.0))
    if name == "cosine":
        if step < warmup:
            return (start + step * (lr - start) / max(1, warmup - 1)) / lr
        return (low + 0.5 * (lr - low) * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))) / lr
    if step < warmup:
        return (step / warmup * (lr - start) + start) / lr
    if name == "constant" or step < total - decay:
        return 1.0
    if step < total:
        return ((total - step) / decay * (lr - low) + low) / lr
    return low / lr


def check_schedule(schedule: dict, total: int) -> None:
    """mohawk's check: ``0 <= warmup + decay < total`` steps."""
    name = schedule.get("name", "wsd")
    if name not in SCHEDULES:
        raise ConfigError(f"schedule {name!r} is not one of {', '.join(SCHEDULES)}")
    unknown = set(schedule) - {"name", "warmup", "decay", "warmup_start_lr", "min_lr"}
    if unknown:
        raise ConfigError(f"schedule: unknown keys {sorted(unknown)}")
    warmup, decay = _schedule_steps(schedule.get("warmup"), total), _schedule_steps(schedule.get("decay"), total)
    if not 0 <= warmup + decay < total:
        raise ConfigError(f"schedule: warm-up ({warmup}) + decay ({decay}) steps must be fewer than the stage's "
                          f"{total} steps")


def param_groups(student: nn.Module, weight_decay: float, no_decay) -> list:
    """AdamW's parameters: one list (every trainable parameter decays: mohawk's
    ``distill/utils.py::setup_optimizer``), or with ``no_decay`` patterns two groups, those matching
    any of them without weight decay."""
    params = [(n, p) for n, p in student.named_parameters() if p.requires_grad]
    if not no_decay:
        return [p for _, p in params]
    pats = [re.compile(x) for x in no_decay]
    skip = [any(x.search(n) for x in pats) for n, _ in params]
    return [{"params": [p for (_, p), s in zip(params, skip) if not s], "weight_decay": weight_decay},
            {"params": [p for (_, p), s in zip(params, skip) if s], "weight_decay": 0.0}]


def stage_options(run: dict, stage: int) -> dict:
    """The keyword arguments of :func:`distill` that a stage's run settings (the workflow's
    ``DISTILL_STAGE[stage]``) set: ``weight_decay``, ``schedule``, ``no_decay``, ``grad_clip``
    (0: none) and, in stages 1 and 2, ``stage1_trainable`` / ``stage2_trainable``. A key absent
    from ``run`` keeps distill's default (the micro study's settings, unchanged)."""
    out = {key: run[key] for key in ("weight_decay", "schedule", "no_decay") if run.get(key) is not None}
    if run.get("grad_clip") is not None:
        out["grad_clip"] = float(run["grad_clip"]) or None
    which = run.get(f"stage{stage}_trainable")
    if which is not None and stage in STAGE_TRAINABLE:
        out["trainable"] = stage_trainable(stage, which)
    return out
