"""The config checks of the layer swap and the hybrid distillation (gna.config.checks calls them
when Snakemake parses the workflow), and the one place their config keys are written: the rest
of the project reads their settings through :func:`distillation_settings` and :func:`swap_settings`."""
from __future__ import annotations

from ...errors import StudyConfigError

DISTILLATION = "hybrid_distillation"
"""The config key of retrieval-guided hybrid distillation (``experiments.hybrid_distillation``)."""
LAYER_SWAP = "layer_swap"
"""The config key of the layer swap (``experiments.layer_swap``)."""


def distillation_settings(config: dict) -> dict:
    """The study's hybrid-distillation settings, or {} where it does not run it."""
    return (config.get("experiments") or {}).get(DISTILLATION) or {}


def swap_settings(config: dict) -> dict:
    """The study's layer-swap settings, or {} where it does not run it."""
    return (config.get("experiments") or {}).get(LAYER_SWAP) or {}


def check_hybrid(config: dict, shapes: dict, known) -> None:
    """experiments.layer_swap and experiments.hybrid_distillation: the models they name, their heads
    and budgets. ``known(where, names)`` refuses a name that is not a model of the config."""
    exps = config.get("experiments") or {}
    swap = exps.get(LAYER_SWAP)
    if swap:
        known("experiments.layer_swap.teacher", [swap["teacher"]])
        known("experiments.layer_swap.student", [swap["student"]] if swap.get("student") else [])
        if shapes[swap["teacher"]][0] is None:
            raise StudyConfigError(f"config error: the layer swap needs models.{swap['teacher']}.n_layers (one job "
                                   "per layer; no local config.json to read it from)")
        if not swap.get("student") and not (swap.get("steps") or swap.get("tokens")):
            raise StudyConfigError("config error: experiments.layer_swap aligns a student (no student given): "
                                   "set its steps or tokens")
    dist = exps.get(DISTILLATION)
    if dist:
        t = dist["teacher"]
        known("experiments.hybrid_distillation.teacher", [t])
        if t not in config["scan"]["models"] and any(k > 0 for k in dist["k"]):
            raise StudyConfigError(f"config error: experiments.hybrid_distillation keeps the top heads of {t!r}'s "
                                   "ranking: add it to scan.models")
        heads = shapes[t][1]
        for key, ks in (("k", dist["k"]), ("state_k", [dist.get("state_k", 0)]),
                        ("random_heads", dist["random_heads"] if isinstance(dist.get("random_heads"), list) else [])):
            for k in ks:
                if heads is not None and k > heads:
                    raise StudyConfigError(f"config error: experiments.hybrid_distillation.{key} = {k} but the "
                                           f"teacher {t!r} has only {heads} heads")
        if dist.get("state_sizes") and "state_k" not in dist:
            raise StudyConfigError("config error: experiments.hybrid_distillation.state_sizes needs state_k "
                                   "(the number of heads kept in the state-size sweep)")
        for i, (s, n) in enumerate(zip(dist.get("steps") or [None] * 3, dist.get("tokens") or [None] * 3), 1):
            if s is None and n is None:
                raise StudyConfigError(f"config error: experiments.hybrid_distillation: stage {i} has neither "
                                       "steps nor tokens")
