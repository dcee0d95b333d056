"""Layer pruning (Figs. 2-3): where retrieval collapses, and which layers it rests on."""
from __future__ import annotations

import pandas as pd


def metric_by(df: pd.DataFrame, key: str, tasks: list[str], metric: str = "acc") -> pd.Series:
    """Mean ``metric`` over ``tasks`` for each value of column ``key``."""
    sel = df[df.task.isin(tasks) & (df.metric == metric)]
    return sel.groupby(key)["value"].mean().sort_index()


def minimal_depth(gradual: pd.DataFrame, mmlu_tasks: list[str], tolerance: float, at_least: int = 2) -> int:
    """Smallest depth L such that every depth >= L keeps MMLU within ``tolerance`` of the full
    model's: the paper's "minimal model" (Llama-3.1-8B: layers 0..17, so L = 18). Never below
    ``at_least`` (head keeping needs two critical layers in it) unless the model is shallower."""
    mmlu = metric_by(gradual, "depth", mmlu_tasks)
    mmlu = mmlu[mmlu.index >= min(at_least, int(mmlu.index.max()))]
    full = mmlu.iloc[-1]
    ok = mmlu >= full - tolerance
    depth = int(mmlu.index.max())
    for d in sorted(mmlu.index, reverse=True):
        if not ok[d]:
            break
        depth = int(d)
    return depth


def critical_layers(individual: pd.DataFrame, mmlu_tasks: list[str], n: int = 2) -> list[int]:
    """The ``n`` layers whose removal from the minimal model costs MMLU the most (in layer order)."""
    mmlu = metric_by(individual[individual.applicable], "layer", mmlu_tasks)
    return sorted(int(layer) for layer in mmlu.nsmallest(n).index)
