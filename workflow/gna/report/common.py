"""Shared plotting and table helpers."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..io import atomic_path, write_csv, write_text  # noqa: E402

PUBLISHED = Path(__file__).resolve().parents[3] / "data" / "published"
ROLE_COLOURS = {"gather": "tab:blue", "aggregate": "tab:red", "-": "tab:gray"}


def published(name: str) -> pd.DataFrame:
    path = PUBLISHED / name
    if not path.is_file():
        raise FileNotFoundError(f"published numbers {path} are missing (they ship with the repository)")
    return pd.read_csv(path)


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


def write_table(df: pd.DataFrame, csv, md, title: str = "", note: str = "", floatfmt: str = ".3f") -> None:
    write_csv(df, csv)
    text = (f"# {title}\n\n" if title else "") + markdown_table(df, floatfmt) + (f"\n{note}\n" if note else "")
    write_text(text, md)
