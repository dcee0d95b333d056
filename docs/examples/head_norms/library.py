"""Head output norms: the Frobenius norm of each head's columns of its mixer's output projection
(the adapter's ``out_proj``), beside the head's rank in the KV-retrieval scan; and the finding that
asks whether the scan's top heads are the largest-norm heads more often than chance."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd


def norms(model) -> pd.DataFrame:
    """One row per head of every mixer with an output projection: layer, head, kind, norm."""
    from gna.models import describe

    rows = []
    for mixer in describe(model).mixers:
        if mixer.out_proj is None or not mixer.head_dim:
            continue
        weight = mixer.out_proj.weight.float()                        # (d_model, n_heads * head_dim)
        for head in range(mixer.n_heads):
            cols = weight[:, head * mixer.head_dim:(head + 1) * mixer.head_dim]
            rows.append({"layer": mixer.layer, "head": head, "kind": mixer.kind, "norm": float(cols.norm())})
    return pd.DataFrame(rows)


def write_table(specs: dict, rankings: dict, out_csv) -> pd.DataFrame:
    """Every model of ``specs`` (name -> ModelSpec fields): its heads' norms and ranks, in one csv."""
    from gna.io import write_csv
    from gna.models import load_model

    tables = []
    for name, spec in specs.items():
        model, _ = load_model(spec, with_tokenizer=False)
        ranking = pd.read_csv(rankings[name])[["layer", "head", "kind", "rank"]]
        tables.append(norms(model).merge(ranking, on=["layer", "head", "kind"]).assign(model=name))
        del model
    table = pd.concat(tables, ignore_index=True)
    write_csv(table, out_csv)
    return table


def overlap_p_value(n_heads: int, top: int, overlap: int) -> float:
    """P(at least ``overlap`` shared heads) when two top-``top`` sets of ``n_heads`` are independent
    (hypergeometric): the null the finding beats."""
    total = math.comb(n_heads, top)
    return sum(math.comb(top, j) * math.comb(n_heads - top, top - j) for j in range(overlap, top + 1)) / total


def findings(fig: Path, top: int = 5) -> list[dict]:
    """Per model: how many of the scan's top ``top`` heads are among the ``top`` largest-norm heads,
    against independence (one-sided p < 0.05: "holds")."""
    path = Path(fig) / "head_norms.csv"
    claim = f"Extension: the scan's top-{top} KV heads are among the {top} largest-norm heads more often than chance"
    if not path.is_file():
        return [{"claim": claim, "model": "-", "verdict": "n/a", "evidence": "head_norms.csv not in this run"}]
    rows = []
    for model, heads in pd.read_csv(path).groupby("model", sort=False):
        ranked = set(heads.nsmallest(top, "rank")[["layer", "head"]].itertuples(index=False))
        largest = set(heads.nlargest(top, "norm")[["layer", "head"]].itertuples(index=False))
        shared, p = len(ranked & largest), overlap_p_value(len(heads), top, len(ranked & largest))
        rows.append({"claim": claim, "model": model, "verdict": "holds" if p < 0.05 else "does not hold",
                     "evidence": f"{shared} of {top} shared among {len(heads)} heads; P(>= {shared} | independent) = {p:.3g}"})
    return rows
