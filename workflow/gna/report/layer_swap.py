"""The layer swap table and figure (Fig. 7): the aligned SSM with one teacher layer swapped in.

MMLU and knowledge per swapped layer, against the unswapped model (``layer`` < 0) and the
four-choice chance line of :mod:`gna.report.common`.

The tables-and-figures layer of the experiment ``layer_swap`` (its computation is
:mod:`gna.hybrid.swap`, built on the distillation's students). One concept at two layers: this module
makes the table and figure, :mod:`gna.report.findings.layer_swap` judges them.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .common import chance_of, read_csvs, save_figure, write_table
from .heads import role_scores


def layer_swap_table(df: pd.DataFrame, mmlu_tasks, knowledge_tasks) -> pd.DataFrame:
    scores = role_scores(df, {"mmlu": mmlu_tasks, "knowledge": knowledge_tasks}, "layer")
    out = scores.reset_index().rename(columns={"index": "layer"})
    out.insert(0, "model", df.model.iloc[0])
    out.insert(1, "teacher", df.teacher.iloc[0])
    out["swapped"] = ["none" if l < 0 else f"L{int(l)}" for l in out.layer]
    return out[["model", "teacher", "swapped", "layer", "mmlu", "knowledge"]]


def layer_swap_figure(table: pd.DataFrame):
    base = table[table.layer < 0].iloc[0]
    sw = table[table.layer >= 0]
    fig, ax = plt.subplots(figsize=(max(4, 0.25 * len(sw) + 2), 3.2))
    ax.plot(sw.layer, sw.mmlu, "o-", c="tab:red", label="MMLU")
    ax.plot(sw.layer, sw.knowledge, "s-", c="tab:blue", label="knowledge")
    ax.axhline(base.mmlu, ls="--", c="tab:red", alpha=0.5, label="MMLU, no swap")
    ax.axhline(base.knowledge, ls="--", c="tab:blue", alpha=0.5, label="knowledge, no swap")
    ax.axhline(100 * chance_of("mmlu"), ls=":", c="gray", label="chance")
    ax.set(title=f"{base.model}: teacher ({base.teacher}) layer i swapped in (Fig. 7)", xlabel="layer swapped",
           ylabel="accuracy (%)", ylim=(0, 102))
    ax.title.set_fontsize(9)
    ax.set_xticks(list(sw.layer))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def make_layer_swap(paths, mmlu_tasks, knowledge_tasks, png, pdf, csv, md) -> pd.DataFrame:
    table = layer_swap_table(read_csvs(paths), mmlu_tasks, knowledge_tasks)
    save_figure(layer_swap_figure(table), png, pdf)
    write_table(table, csv, md, title="Swapping one teacher layer into the aligned SSM (Fig. 7)",
                note="Percent. Published: Llamba-8B-unaligned (MMLU 33%, knowledge 69%) with Llama-3.1-8B's layer 17 "
                     "swapped in reaches MMLU 50%, knowledge unchanged.")
    return table
