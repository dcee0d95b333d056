"""What every findings check shares: the settings and their defaults, the verdict words, reading a table.

The chance convention the checks apply (``chance_of``, ``near_chance``) is the one in
:mod:`gna.report.common`, which the figures' chance lines use too.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...config.schema import defaults_of
from ..common import near_chance
from ..verdict import Part, claim_verdict, evidence

SETTING_KEYS = ("mmlu_chance", "tolerance", "collapse", "knowledge_tolerance", "knowledge_margin", "knowledge_chance",
                "smallest_effect")
_LAYER_PRUNING = defaults_of("experiments.layer_pruning")
SETTINGS = {key: _LAYER_PRUNING.get(key) for key in SETTING_KEYS}
"""The thresholds' defaults: the layer-pruning experiment's, from the schema (where defaults live)."""


def with_settings(settings: dict | None) -> dict:
    """``settings`` over :data:`SETTINGS`; a None value (a study without layer pruning) keeps the default."""
    return {**SETTINGS, **{k: v for k, v in (settings or {}).items() if v is not None}}


def read_table(figures, name: str) -> pd.DataFrame | None:
    """``figures/name``, or None where this run did not write that table."""
    p = Path(figures) / name
    return pd.read_csv(p) if p.is_file() else None


def knowledge_line(reference: float, settings: dict, scale: float = 1.0) -> float:
    """The one knowledge margin of every section that judges knowledge (Fig. 3, Table 1, top-k, the
    hybrids): ``knowledge_margin`` (a share) of the reference model's knowledge above the knowledge
    tasks' chance (``knowledge_chance``, 0 where unset), in units of ``scale`` (1: accuracies in 0-1,
    100: percent). Fig. 3's critical-layers test uses the same rule (:func:`gna.experiments.pruning.critical_table`):
    a tenth of what there is to lose, so that a critical layer (which costs at least half the above-chance
    MMLU) costs retrieval five times what knowledge may lose; near chance it shrinks to nothing, and the
    near-chance note (:func:`knowledge_untestable`) says so."""
    chance = settings.get("knowledge_chance") or 0.0
    return settings["knowledge_margin"] * max(reference / scale - chance, 0.0) * scale


def knowledge_untestable(knowledge: float, settings: dict, scale: float = 1.0) -> str:
    """Why "knowledge stays" cannot fail where the reference model's ``knowledge`` (in units of
    ``scale``) is near the knowledge tasks' chance (``settings["knowledge_chance"]``), else ""."""
    chance = settings.get("knowledge_chance")
    if chance is None or not near_chance(knowledge, chance, scale):
        return ""
    return (f"knowledge is near chance in the minimal model ({knowledge / scale:.2f}, chance {chance:.2f}): that "
            f"it stays cannot fail, so what a layer or head does to it is not told")


def knowledge_chance(settings: dict, paper_effect) -> float:
    """The knowledge tasks' chance a paper effect on knowledge is scaled from: the study's
    ``knowledge_chance`` where set, else the chance of the paper's own tasks (``paper_effect.chance``, in
    percent)."""
    chance = settings.get("knowledge_chance")
    return paper_effect.chance / 100 if chance is None else chance


def capped(verdict: str, untestable: str) -> str:
    """A ``holds`` resting on knowledge staying where that cannot fail (``untestable``: the note of
    :func:`knowledge_untestable`, "" where it can) is at most ``partly``."""
    return "partly" if untestable and verdict == "holds" else verdict


def not_applicable(claim: str, model: str, why: str) -> dict:
    """A claim's row for a model it cannot be judged on (near chance, or the run lacks what it needs)."""
    return dict(claim=claim, model=model, verdict="n/a", evidence=why)


def judge(ok: bool, partly: bool = False) -> str:
    """The verdict on thresholds alone: ``holds`` where ``ok``, else ``partly`` where ``partly``, else
    ``does not hold``. Only for a table without the questions' number (a hand-made table, arithmetic
    like the memory formula): a sampled one is judged on its intervals by :mod:`gna.report.verdict`."""
    return "holds" if ok else ("partly" if partly else "does not hold")


def judged(parts: list[Part], n_text: str) -> tuple[str, str]:
    """(verdict, evidence) of a claim's parts, by :mod:`gna.report.verdict`."""
    return claim_verdict(parts), f"; n = {n_text}; {evidence(parts)}"
