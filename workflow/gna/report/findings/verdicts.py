"""What every findings check shares: the settings' defaults, the verdict words, reading a table.

The chance convention the checks apply (``chance_of``, ``near_chance``) is the one in
:mod:`gna.report.common`, which the figures' chance lines use too.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

SETTINGS = {"mmlu_chance": 0.25, "tolerance": 0.05, "collapse": 0.5, "knowledge_tolerance": 0.05}


def read_table(figures, name: str) -> pd.DataFrame | None:
    """``figures/name``, or None where this run did not write that table."""
    p = Path(figures) / name
    return pd.read_csv(p) if p.is_file() else None


def judge(ok: bool, partly: bool = False) -> str:
    """The verdict: ``holds`` where ``ok``, else ``partly`` where ``partly``, else ``does not hold``."""
    return "holds" if ok else ("partly" if partly else "does not hold")
