"""Figs. 2-3: MMLU vs knowledge under gradual and individual layer pruning.

The tables-and-figures layer of the experiment ``layer_pruning``. One concept at three layers:
:mod:`gna.experiments.pruning` runs it, this module draws it, :mod:`gna.report.findings.pruning` judges it.
"""
from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..experiments.pruning import metric_by
from .common import save_figure, write_table


def _panels(n: int, title: str):
    fig, axes = plt.subplots(1, n, figsize=(4 * n, 3.2), squeeze=False)
    fig.suptitle(title, fontsize=10)
    return fig, axes[0]


def gradual_figure(tables: dict[str, pd.DataFrame], minimal: dict[str, int], mmlu, knowledge):
    fig, axes = _panels(len(tables), "Gradual layer pruning: keep layers 0..L-1 (Fig. 2)")
    for ax, (model, df) in zip(axes, tables.items()):
        ax.plot(metric_by(df, "depth", mmlu), "o-", label="MMLU-format")
        ax.plot(metric_by(df, "depth", knowledge), "s-", label="knowledge")
        ax.axvline(minimal[model], ls=":", c="gray", label=f"minimal depth {minimal[model]}")
        ax.set(title=model, xlabel="layers kept", ylabel="accuracy", ylim=(0, 1.02))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole layers, not 1.2
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def individual_figure(tables: dict[str, pd.DataFrame], mmlu, knowledge):
    fig, axes = _panels(len(tables), "Individual layer pruning of the minimal model (Fig. 3)")
    for ax, (model, df) in zip(axes, tables.items()):
        df = df[df.applicable]
        m, k = metric_by(df, "layer", mmlu), metric_by(df, "layer", knowledge)
        x = range(len(m))
        ax.bar([i - 0.2 for i in x], m.values, 0.4, label="MMLU-format")
        ax.bar([i + 0.2 for i in x], k.values, 0.4, label="knowledge")
        ax.set_xticks(list(x), [f"L{i}" for i in m.index])
        ax.set(title=model, xlabel="layer removed", ylabel="accuracy", ylim=(0, 1.02))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def summary(gradual, individual, minimal, mmlu, knowledge) -> pd.DataFrame:
    rows = []
    for model in gradual:
        for depth, v in metric_by(gradual[model], "depth", mmlu).items():
            rows.append(dict(model=model, experiment="gradual", layers=f"0..{depth - 1}", depth=int(depth),
                             minimal_depth=minimal[model], mmlu=v,
                             knowledge=metric_by(gradual[model], "depth", knowledge)[depth]))
        ind = individual[model][individual[model].applicable]
        for layer, v in metric_by(ind, "layer", mmlu).items():
            rows.append(dict(model=model, experiment=f"minimal (0..{minimal[model] - 1}) minus layer", layers=f"L{layer}",
                             depth=minimal[model] - 1, minimal_depth=minimal[model],
                             mmlu=v, knowledge=metric_by(ind, "layer", knowledge)[layer]))
    return pd.DataFrame(rows)


def make(models, gradual_paths, individual_paths, minimal_paths, mmlu, knowledge, out) -> None:
    gradual = {m: pd.read_csv(p) for m, p in zip(models, gradual_paths)}
    individual = {m: pd.read_csv(p) for m, p in zip(models, individual_paths)}
    minimal = {m: json.load(open(p))["minimal_depth"] for m, p in zip(models, minimal_paths)}
    save_figure(gradual_figure(gradual, minimal, mmlu, knowledge), out.gradual, out.gradual_pdf)
    save_figure(individual_figure(individual, mmlu, knowledge), out.individual, out.individual_pdf)
    write_table(summary(gradual, individual, minimal, mmlu, knowledge), out.csv, out.md,
                title="Layer pruning: MMLU-format and knowledge accuracy",
                note="Published (Llama-3.1-8B): MMLU holds until layer 17 is cut; minimal model 0..17; "
                     "L16 and L17 critical (Falcon-Mamba-7B: L35, L36; Llamba-8B: L16, L17).")
