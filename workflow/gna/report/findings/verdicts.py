"""What every findings check shares: the settings and their defaults, the verdict words, reading a table.

The chance convention the checks apply (``chance_of``, ``near_chance``) is the one in
:mod:`gna.report.common`, which the figures' chance lines use too.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...config.schema import defaults_of

SETTING_KEYS = ("mmlu_chance", "tolerance", "collapse", "knowledge_tolerance")
_LAYER_PRUNING = defaults_of("experiments.layer_pruning")
SETTINGS = {key: _LAYER_PRUNING[key] for key in SETTING_KEYS}
"""The thresholds' defaults: the layer-pruning experiment's, from the schema (where defaults live)."""


def with_settings(settings: dict | None) -> dict:
    """``settings`` over :data:`SETTINGS`; a None value (a study without layer pruning) keeps the default."""
    return {**SETTINGS, **{k: v for k, v in (settings or {}).items() if v is not None}}


def read_table(figures, name: str) -> pd.DataFrame | None:
    """``figures/name``, or None where this run did not write that table."""
    p = Path(figures) / name
    return pd.read_csv(p) if p.is_file() else None


def judge(ok: bool, partly: bool = False) -> str:
    """The verdict: ``holds`` where ``ok``, else ``partly`` where ``partly``, else ``does not hold``."""
    return "holds" if ok else ("partly" if partly else "does not hold")
