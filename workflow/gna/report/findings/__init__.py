"""``figures/findings.md``: for each claim of the paper, whether this run shows it, with numbers.

Each check reads the tables the other report rules wrote and returns rows of (claim, model,
verdict, evidence). Verdicts: ``holds``, ``does not hold``, ``partly``, ``n/a`` (the run lacks
what the claim needs, or the unmodified model is near chance on the claim's task: within
``common.NEAR_CHANCE`` of ``common.CHANCE``, the one chance convention). At micro scale the
comparison is of shape, not of values. A control replicated by random draws (random heads) is
judged with the draw as its unit (:func:`gna.report.verdict.t_interval`).

Settings (``make``'s ``settings``; the findings rule passes the config's): ``mmlu_chance``,
``tolerance`` (layer_pruning: MMLU kept within it; top-k's retrieval fall beyond it), ``collapse``
(share of the above-chance MMLU lost for a collapse), ``knowledge_margin`` (the one knowledge margin
of every section that judges knowledge: :func:`.verdicts.knowledge_line`), ``knowledge_tolerance``
(knowledge's point checks on a table without the questions' number), ``knowledge_chance`` (where set:
knowledge near it in the minimal model makes "knowledge stays" no result), ``smallest_effect`` (the
smallest effect of interest of a part with a line at 0 and no paper number), accuracies in 0-1; the
questions behind them, ``mmlu_n`` (one sample size for every task) or ``task_n`` ({role: n}, the
micro study's, counted from its task files), and ``kv_n`` (a KV probe set's prompts). With them,
every verdict is judged on its intervals by the one rule of :mod:`gna.report.verdict`, against the
paper's own effects (:mod:`.paper`, one table with sources), and says so where its n is under what
80% power needs. Every part printed is also a row of ``verdicts.csv`` and of its forest plot
(:mod:`.table`), written beside ``findings.md``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import save_figure, with_precision, write_text
from ..verdict import recording
from . import table as verdict_table
from .verdicts import with_settings
from ...experiments.registry import call_with, resolve
from ...io import write_csv


def make(figures_dir, out_md, sections: list[dict], settings: dict | None = None,
         rankings: dict | None = None, verdicts_csv=None, verdicts_png=None, verdicts_pdf=None) -> pd.DataFrame:
    """Every check on the tables in ``figures_dir``: ``sections``, as the experiments' rule files
    declare them (gna.experiments.registry.Section, as dicts, in order); ``settings``: see the
    package docstring; ``rankings``: {model: the scan's ranking csv}, for the checks that read them.
    ``verdicts_csv`` / ``_png`` / ``_pdf`` (default: beside ``out_md``): every printed part."""
    fig = Path(figures_dir)
    available = {"settings": with_settings(settings), "rankings": rankings}
    rows, records = [], []
    for sec in sections:
        with recording() as seen:
            found = list(call_with(resolve(sec["function"]), fig, available=available, **sec.get("options", {})))
        for row in found:   # a row's parts: those its evidence prints
            mine = [p for p, digits in seen if p.text(digits) in row["evidence"]]
            records += verdict_table.rows(row["claim"], row["model"], mine)
        rows += found
    df = pd.DataFrame(rows, columns=["claim", "model", "verdict", "evidence"])
    parts = verdict_table.frame(records)
    out = Path(out_md).parent
    csv = verdicts_csv or out / "verdicts.csv"
    write_csv(with_precision(parts), csv)
    if verdicts_png is not None or verdicts_csv is None:
        save_figure(verdict_table.figure(parts), verdicts_png or out / "verdicts.png", verdicts_pdf or out / "verdicts.pdf")
    lines = ["# Findings: which of the paper's claims this run shows", "",
             "Computed from the tables in this folder by `gna.report.findings`; thresholds are in its source "
             "and the config. Every tested part, on one axis ([verdicts.csv](verdicts.csv)):", "",
             "![every tested part: estimate, interval, line, paper's effect, verdict](verdicts.png)", ""]
    for claim, sub in df.groupby("claim", sort=False):
        lines.append(f"## {claim}")
        lines += [f"- **{r.model}**: {r.verdict}. {r.evidence}" for r in sub.itertuples()]
        lines.append("")
    write_text("\n".join(lines), out_md)
    return df
