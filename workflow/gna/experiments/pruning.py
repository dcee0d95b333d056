"""Layer pruning (Figs. 2-3): where retrieval collapses, and which layers it rests on.

One concept at three layers, one module each: this one runs the pruning; :mod:`gna.report.pruning`
draws its figures; :mod:`gna.report.findings.pruning` judges the paper's claims on them.
"""
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


def critical_table(individual: pd.DataFrame, mmlu_tasks: list[str], knowledge_tasks: list[str],
                   base_mmlu: float, base_knowledge: float, chance: float = 0.25, collapse: float = 0.5,
                   knowledge_tolerance: float = 0.05) -> pd.DataFrame:
    """Fig. 3's verdict per removed layer of the minimal model.

    A layer is *critical* when removing it collapses MMLU, i.e. loses at least ``collapse`` of the
    minimal model's accuracy above ``chance``, **while knowledge stays within**
    ``knowledge_tolerance`` of the minimal model's (the notebook's wording: critical layers do
    not carry knowledge; a layer whose removal breaks everything is not one).
    Columns: layer, mmlu, knowledge, mmlu_lost (share of above-chance MMLU lost), collapsed,
    knowledge_kept, critical."""
    ok = individual[individual.applicable.astype(bool)]
    mmlu = metric_by(ok, "layer", mmlu_tasks)
    know = metric_by(ok, "layer", knowledge_tasks)
    above = base_mmlu - chance
    rows = []
    for layer in mmlu.index:
        lost = (base_mmlu - mmlu[layer]) / above if above > 0 else 0.0
        collapsed = above > 0 and lost >= collapse
        kept = bool(know.get(layer, float("nan")) >= base_knowledge - knowledge_tolerance)
        rows.append({"layer": int(layer), "mmlu": float(mmlu[layer]), "knowledge": float(know.get(layer, float("nan"))),
                     "mmlu_lost": float(lost), "collapsed": bool(collapsed), "knowledge_kept": kept,
                     "critical": bool(collapsed and kept)})
    return pd.DataFrame(rows, columns=["layer", "mmlu", "knowledge", "mmlu_lost", "collapsed", "knowledge_kept",
                                       "critical"])


def critical_layers(table: pd.DataFrame) -> list[int]:
    """Every critical layer of :func:`critical_table`, in layer order (possibly none)."""
    return sorted(int(r.layer) for r in table.itertuples() if r.critical)


def critical_pair(table: pd.DataFrame) -> list[int]:
    """Table 1's two layers (Gather, then Aggregate): the two critical layers whose removal costs
    MMLU most, in layer order; [] when fewer than two layers are critical (no fallback)."""
    crit = table[table.critical].sort_values(["mmlu_lost", "layer"], ascending=[False, True])
    return sorted(int(x) for x in crit.layer.head(2)) if len(crit) >= 2 else []
