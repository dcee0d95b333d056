"""Head ranking (paper section 5): the top heads by KV-retrieval drop, with their G&A roles.

The tables-and-figures layer of the experiment ``scan`` (its head explorer page is :mod:`.explorer`).
One concept at three layers: :mod:`gna.experiments.head_scan` ranks the heads, this module draws the
ranking, :mod:`gna.report.findings.head_scan` judges it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .common import ROLE_COLOURS, published, save_figure, write_table


HEAD_LABELS = ("head labels: L3H2 = layer 3, head 2 (counted from 0); in a hybrid, L3A2 = attention head 2 and "
               "L3M2 = SSM (Mamba) head 2 of layer 3")


def draw(ga_tables: dict[str, pd.DataFrame], top: int = 10):
    """One panel per model: bars of the accuracy drop of its top heads, coloured by role."""
    fig, axes = plt.subplots(1, len(ga_tables), figsize=(4.2 * len(ga_tables), 3.4), squeeze=False)
    for ax, (model, df) in zip(axes[0], ga_tables.items()):
        df = df.sort_values("rank").head(top)
        mixed = df.kind.nunique() > 1  # hybrid: A = attention head, M = SSM head
        labels = [f"L{r.layer}{('A' if r.kind == 'attention' else 'M') if mixed else 'H'}{r.head}"
                  for r in df.itertuples()]
        ax.bar(range(len(df)), df["drop"], color=[ROLE_COLOURS.get(r, "tab:gray") for r in df.role])
        ax.set_xticks(range(len(df)), labels, rotation=60, fontsize=7)
        ax.set_title(f"{model} (baseline {df.baseline_accuracy.iloc[0]:.2f})", fontsize=9)
        ax.set_ylabel("KV accuracy drop")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ROLE_COLOURS.values()]
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.legend(handles, ["Gather", "Aggregate", "neither"], loc="lower center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 0.04))
    fig.text(0.5, 0.005, HEAD_LABELS, ha="center", va="bottom", fontsize=7)
    return fig


def table(ga_tables: dict[str, pd.DataFrame], paper_keys: dict[str, str], top: int = 10) -> pd.DataFrame:
    """Top heads per model; where the model is a published one, the published head beside ours."""
    pub = published("top_heads.csv")
    rows = []
    for model, df in ga_tables.items():
        ref = pub[pub.model == paper_keys.get(model, "")].set_index("rank")
        for r in df.sort_values("rank").head(top).itertuples():
            p = ref.loc[r.rank] if r.rank in ref.index else None
            rows.append(dict(model=model, rank=r.rank, layer=r.layer, head=r.head, kind=r.kind,
                             accuracy=r.accuracy, drop=r.drop, gather_score=r.gather_score,
                             aggregate_score=r.aggregate_score, role=r.role,
                             published=f"L{p.layer}H{p['head']}" if p is not None else ""))
    return pd.DataFrame(rows)


def make(ga_paths: dict[str, str], paper_keys: dict[str, str], png, pdf, csv, md, top: int = 10) -> None:
    ga = {m: pd.read_csv(p) for m, p in ga_paths.items()}
    save_figure(draw(ga, top), png, pdf)
    write_table(table(ga, paper_keys, top), csv, md, title="Top KV-retrieval heads by single-head ablation",
                note="`drop`: baseline accuracy minus accuracy with the head alone ablated. `role` from the head's "
                     "token-mixing pattern on the probe (gather / aggregate / neither). `published`: the paper's "
                     "head at that rank, where the model is the paper's.")
