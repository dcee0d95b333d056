"""``verdicts.csv`` and ``verdicts.png`` / ``.pdf``: every part the findings print, as a table a
program reads (the figures check, the README) and as a forest plot a reader looks at.

One row per printed part (:data:`gna.report.verdict.COLUMNS`): its claim and model, its estimate and
interval, the line it is judged against, the paper's scaled effect, the detectable effect, n, whether
it is paired, how it was tested and its verdict. The plot draws the rows on one axis, grouped by claim
and model: the interval as a bar, the estimate as a dot, the line as ``|``, the paper's effect as
``x``, each row coloured by its verdict and labelled with its n.
"""
from __future__ import annotations

import textwrap

import pandas as pd

from ..verdict import COLUMNS, HOLDS, REFUTED, UNRESOLVED, Part

COLOURS = {HOLDS: "#1b7837", REFUTED: "#c51b7d", UNRESOLVED: "#7f7f7f", "underpowered": "#e08214"}


def rows(claim: str, model: str, parts: list[Part]) -> list[dict]:
    """The table's rows of one finding's parts."""
    return [{"claim": claim, "model": model, **p.row()} for p in parts]


def frame(records: list[dict]) -> pd.DataFrame:
    """The rows as the table (its columns in order; a part printed twice in one finding once)."""
    df = pd.DataFrame(records, columns=COLUMNS)
    return df.drop_duplicates(subset=["claim", "model", "part"], keep="first").reset_index(drop=True)


def colour(verdict: str) -> str:
    if verdict.startswith(f"{UNRESOLVED} (underpowered"):
        return COLOURS["underpowered"]
    return COLOURS.get(verdict, COLOURS[UNRESOLVED])


def figure(df: pd.DataFrame):
    """The forest plot of ``df`` (the table): one row per part, grouped by claim and model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    labels, ys, y = [], [], 0
    groups = list(df.groupby(["claim", "model"], sort=False))
    heads = []
    for (claim, model), sub in groups:
        heads.append((y, f"{textwrap.shorten(claim, 90, placeholder='...')} | {model}"))
        y += 1
        for r in sub.itertuples():
            ys.append(y)
            labels.append(textwrap.shorten(str(r.part), 70, placeholder="..."))
            y += 1
        y += 0.4
    height = max(2.5, 0.22 * y + 1.0)
    fig, ax = plt.subplots(figsize=(11, height))
    for yy, r in zip(ys, df.itertuples()):
        c = colour(r.verdict)
        ax.hlines(yy, r.low, r.high, color=c, lw=2)
        ax.plot(r.estimate, yy, "o", color=c, ms=4)
        ax.plot(r.line, yy, "|", color="black", ms=9, mew=1.5)
        if pd.notna(r.paper):
            ax.plot(r.paper, yy, "x", color="#2166ac", ms=6, mew=1.5)
        n = "" if pd.isna(r.n) else f"n={int(r.n)}"
        ax.annotate(n, (max(r.high, r.line if pd.notna(r.line) else r.high), yy), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=6)
    for yy, text in heads:
        ax.text(0.0, yy, text, transform=ax.get_yaxis_transform(), ha="left", va="center", fontsize=6.5,
                fontweight="bold")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=6)
    ax.set_ylim(y, -1)
    ax.axvline(0, color="#cccccc", lw=0.8, zorder=0)
    ax.set_xlabel("effect (accuracy difference, 0-1): estimate and interval; | the line; x the paper's scaled effect")
    legend = [Line2D([0], [0], color=COLOURS[k], lw=2, label=k) for k in (HOLDS, REFUTED, UNRESOLVED)]
    legend.append(Line2D([0], [0], color=COLOURS["underpowered"], lw=2, label="not resolved (underpowered)"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=6, frameon=False)
    ax.set_title("Every tested part of the findings (verdicts.csv)", fontsize=9)
    return fig
