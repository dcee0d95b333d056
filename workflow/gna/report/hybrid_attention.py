"""The hybrid attention table (section 5.3): a hybrid's attention heads masked or ablated.

Top-k of the KV ranking among the attention heads (or all of them), with the unmodified model
(k = 0) evaluated once and repeated for each mode, beside the published Zamba2 slide tables
(``ablation_topk.csv``) through :func:`gna.report.topk.topk_table`.

The tables-and-figures layer of the experiment ``hybrid_attention`` (whose heads it removes are picked
by :mod:`gna.experiments.head_selection`, shared with the other head experiments). One concept at two
layers: :mod:`gna.experiments.hybrid_attention` runs a condition, this module makes the table,
:mod:`gna.report.findings.hybrid_attention` judges it.
"""
from __future__ import annotations

import pandas as pd

from .common import read_csvs, write_table
from .topk import topk_table


def make_hybrid_attention(models, paths, roles, paper_keys, csv, md) -> pd.DataFrame:
    """One row per (model, mode, k); k = 0 (the unmodified model, evaluated once) heads each mode."""
    per_mode = {}
    for m, ps in zip(models, paths):
        df = read_csvs(ps)
        base = df[df.k == 0]
        for mode in [x for x in dict.fromkeys(df.get("mode", pd.Series(dtype=str)).dropna()) if x]:
            per_mode[(m, mode)] = pd.concat([base.assign(mode=mode), df[(df.k > 0) & (df["mode"] == mode)]],
                                            ignore_index=True)
    tables = {f"{m}|{mode}": df for (m, mode), df in per_mode.items()}
    table = topk_table(tables, roles, {}, "ablation_topk.csv")
    labels = {(key, int(k)): str(lab) for key, df in tables.items()
              for k, lab in zip(df.k, df.get("k_label", df.k).fillna(0).astype(str))}
    heads = [("all " if labels.get((key, int(k))) == "all" else "") + str(int(k))
             for key, k in zip(table.model, table.k)]
    split = table.model.str.split("|", n=1, expand=True)
    table.insert(0, "mode", split[1])
    table["model"] = split[0]
    table.insert(3, "heads_masked", heads)
    write_table(table, csv, md, title="Masking a hybrid's attention heads (Zamba2, section 5.3)",
                note="`last_row`: the heads' softmax row at the answer position (each prompt's last token) zeroed, "
                     "as the official code's `mask_last_row` does; `all` = every attention head of every invocation "
                     "of the shared block, the SSMs and every other position untouched. `ablate`: the heads zeroed "
                     "at every position. k = top-k attention heads of the KV ranking among attention heads; k = 0 is "
                     "the unmodified model (evaluated once). Scores in percent (`*_ppl`: perplexity). Published "
                     "(Zamba2-7B, last_row, all heads): MMLU 64.3 -> 34.9 while knowledge holds.")
    return table
