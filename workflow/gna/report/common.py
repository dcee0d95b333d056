"""Shared plotting and table helpers: every experiment's tables and figures draw with them."""
from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..io import atomic_path, write_csv, write_text  # noqa: E402

PUBLISHED_ENV = "GNA_PUBLISHED"
"""Where the published numbers are: the workflow sets it (common.smk: <repository>/data/published)."""
ROLE_COLOURS = {"gather": "tab:blue", "aggregate": "tab:red", "-": "tab:gray"}

# The chance convention, in one place: accuracy as a fraction (0-1). A percent table converts
# with ``scale=100``. A task is *near chance* when the unmodified model scores less than
# NEAR_CHANCE above its chance level; a claim resting on that task is then ``n/a``.
CHANCE = {"mmlu": 0.25, "arc_challenge": 0.25, "arc_challenge_chat": 0.25}
"""Chance accuracy (fraction) of the four-choice roles; generation tasks (exact match) have ~0."""
NEAR_CHANCE = 0.10


def chance_of(role: str, mmlu_chance: float | None = None) -> float:
    """Chance accuracy (fraction) of a role: ``CHANCE`` (MMLU: ``mmlu_chance`` where given), else 0
    (generation tasks scored by exact match or contains). KV retrieval: 1 / pairs, see kv_chance."""
    if role == "mmlu" and mmlu_chance is not None:
        return float(mmlu_chance)
    return CHANCE.get(role, 0.0)


def near_chance(value: float, chance: float, scale: float = 1.0) -> bool:
    """Whether ``value`` (in units of ``scale``: 1 for 0-1, 100 for percent) is within NEAR_CHANCE of
    ``chance`` (a fraction)."""
    return bool(value < (chance + NEAR_CHANCE) * scale)


def spread(values) -> tuple[float, float, float]:
    """(mean, min, max) of the values of several draws or seeds; the spread reported is min-max."""
    s = pd.Series(list(values), dtype=float).dropna()
    if s.empty:
        return float("nan"), float("nan"), float("nan")
    return float(s.mean()), float(s.min()), float(s.max())


def fmt_spread(mean: float, lo: float, hi: float, fmt: str = ".1f") -> str:
    """``"41.0 [35.5, 47.0]"``: a mean and its min-max spread."""
    if pd.isna(mean):
        return ""
    return f"{format(mean, fmt)} [{format(lo, fmt)}, {format(hi, fmt)}]"


def read_csvs(paths) -> pd.DataFrame:
    """The rows of several CSV files (an experiment's per-job outputs), in order."""
    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)


def published_dir() -> Path:
    """The folder of the paper's published numbers, as the workflow names it (``GNA_PUBLISHED``)."""
    value = os.environ.get(PUBLISHED_ENV)
    if not value:
        raise FileNotFoundError(f"the folder of the published numbers is not set: the workflow sets {PUBLISHED_ENV}; "
                                "outside it, set it to the repository's data/published")
    return Path(value)


def published(name: str) -> pd.DataFrame:
    path = published_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"published numbers {path} are missing (they ship with the repository)")
    return pd.read_csv(path)


def model_panels(table: pd.DataFrame, title: str):
    """``(fig, [(model, its rows, its axes)])``: one 4 x 3.2 panel per model of ``table``, in order."""
    models = list(dict.fromkeys(table.model))
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.2), squeeze=False)
    fig.suptitle(title, fontsize=10)
    return fig, [(m, table[table.model == m], ax) for m, ax in zip(models, axes[0])]


def save_figure(fig, png, pdf=None) -> None:
    """PNG and PDF, each written atomically. Metadata pinned so reruns give the same bytes."""
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    if pdf:
        with atomic_path(pdf) as tmp:
            fig.savefig(tmp, format="pdf", bbox_inches="tight", metadata={"CreationDate": None, "Creator": None,
                                                                       "Producer": None})
    plt.close(fig)


def markdown_table(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """A GitHub Markdown table (no extra dependency)."""
    def fmt(v):
        return format(v, floatfmt) if isinstance(v, float) else str(v)
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(fmt(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows]) + "\n"


TABLE_DIGITS = 4
"""Significant digits of a float in a figures/ table. An accuracy over a 200-prompt probe moves in
steps of 0.5 points (a mean over 3 draws in 1/6), so 4 digits hold every distinct value (97.67);
digits past them are float noise that differs from machine to machine (summation order)."""


def with_precision(df: pd.DataFrame, digits: int = TABLE_DIGITS) -> pd.DataFrame:
    """``df`` with its float columns rounded to ``digits`` significant digits (NaN kept)."""
    def sig(v):
        return float(f"{v:.{digits}g}") if pd.notna(v) else v
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(sig)
    return out


def write_table(df: pd.DataFrame, csv, md, title: str = "", note: str = "", floatfmt: str = ".3f",
                md_df: pd.DataFrame | None = None, digits: int | None = TABLE_DIGITS) -> None:
    """``df`` to ``csv`` (floats to ``digits`` significant digits; None: a table that rounds its
    exact numbers itself); ``md_df`` (default ``df``: e.g. a view with "mean [min, max]" cells) to ``md``."""
    write_csv(df if digits is None else with_precision(df, digits), csv)
    text = ((f"# {title}\n\n" if title else "") + markdown_table(df if md_df is None else md_df, floatfmt)
            + (f"\n{note}\n" if note else ""))
    write_text(text, md)
