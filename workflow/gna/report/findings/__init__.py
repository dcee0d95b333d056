"""``figures/findings.md``: for each claim of the paper, whether this run shows it, with numbers.

Each check reads the tables the other report rules wrote and returns rows of (claim, model,
verdict, evidence). Verdicts: ``holds``, ``does not hold``, ``partly``, ``n/a`` (the run lacks
what the claim needs, or the unmodified model is near chance on the claim's task: within
``common.NEAR_CHANCE`` of ``common.CHANCE``, the one chance convention). At micro scale the
comparison is of shape, not of values. Where a number rests on random draws (random heads, probe
sets) the tables carry min-max spreads, and a verdict asks for an effect beyond them.

Settings (``make``'s ``settings``; the findings rule passes the config's): ``mmlu_chance``,
``tolerance`` (layer_pruning: MMLU kept within it), ``collapse`` (share of the above-chance MMLU
lost for a collapse), ``knowledge_tolerance`` (knowledge kept within it), ``knowledge_chance``
(where set: knowledge near it in the minimal model makes "knowledge stays" no result), accuracies
in 0-1; the questions behind them, ``mmlu_n`` (one sample size for every task) or ``task_n``
({role: n}, the micro study's, counted from its task files), and ``kv_n`` (a KV probe set's
prompts). With them, every verdict is judged on its intervals by the one rule of
:mod:`gna.report.verdict`, against the paper's own effects (:mod:`.paper`, one table with sources),
and says so where its n is under what 80% power needs.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import write_text
from .verdicts import with_settings
from ...experiments.registry import call_with, resolve


def make(figures_dir, out_md, sections: list[dict], settings: dict | None = None,
         rankings: dict | None = None) -> pd.DataFrame:
    """Every check on the tables in ``figures_dir``: ``sections``, as the experiments' rule files
    declare them (gna.experiments.registry.Section, as dicts, in order); ``settings``: see the
    package docstring; ``rankings``: {model: the scan's ranking csv}, for the checks that read them."""
    fig = Path(figures_dir)
    available = {"settings": with_settings(settings), "rankings": rankings}
    rows = [row for sec in sections
            for row in call_with(resolve(sec["function"]), fig, available=available, **sec.get("options", {}))]
    df = pd.DataFrame(rows, columns=["claim", "model", "verdict", "evidence"])
    lines = ["# Findings: which of the paper's claims this run shows", "",
             "Computed from the tables in this folder by `gna.report.findings`; thresholds are in its source.", ""]
    for claim, sub in df.groupby("claim", sort=False):
        lines.append(f"## {claim}")
        lines += [f"- **{r.model}**: {r.verdict}. {r.evidence}" for r in sub.itertuples()]
        lines.append("")
    write_text("\n".join(lines), out_md)
    return df
