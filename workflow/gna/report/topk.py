"""The slides' top-k tables and figure: top-k removal beside k random heads, ARC-C chat vs regular.

The tables-and-figures layer of the top-k experiments ``topk_removal`` and ``arc_chat`` (and the table
of ``hybrid_attention``, :mod:`.hybrid_attention`, drawn by :func:`topk_table`). One concept at three
layers: :mod:`gna.experiments.topk` sizes the removal and names its control, this module makes the
tables, :mod:`gna.report.findings.topk` judges them.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .common import fmt_spread, published, save_figure, spread, write_table
from .heads import role_scores


SCORE_SKIP = ("model", "k", "heads_pct", "selection", "draws")


def _role_columns(table: pd.DataFrame) -> list[str]:
    """The score columns of a top-k table (not paper_/diff_/random_ columns, filters or spreads)."""
    return [c for c in table.columns if c not in SCORE_SKIP and not c.startswith(("paper_", "diff_", "random_"))
            and not c.endswith(("_filter", "_min", "_max"))]


def topk_table(tables: dict[str, pd.DataFrame], roles, paper_keys: dict[str, str], file: str) -> pd.DataFrame:
    """One row per (model, k): the role scores with the top-k heads removed; where the results hold
    the random-k control (rows with ``selection == "random"``, one ``draw`` each), beside them
    ``random_<role>`` (the mean over draws), ``random_<role>_min`` / ``_max`` (the spread, min-max)
    and ``random_draws``; where the model is the paper's, the published numbers beside."""
    pub = published(file)
    rows = []
    for model, df in tables.items():
        sel = df["selection"].fillna("ranked") if "selection" in df else pd.Series("ranked", index=df.index)
        scores = role_scores(df[sel != "random"], roles, "k")
        rnd = df[sel == "random"]
        ref = pub[pub.model == paper_keys.get(model, "")]
        n_heads = int(df["n_heads"].dropna().iloc[0]) if "n_heads" in df and df["n_heads"].notna().any() else None
        for k, r in scores.iterrows():
            row = dict(model=model, k=int(k), **({"heads_pct": 100 * int(k) / n_heads} if n_heads else {}),
                       **r.to_dict())
            for role, v in r.items():
                hit = ref[(ref.heads_removed == k) & (ref.metric == role)]
                if not hit.empty:
                    row[f"paper_{role}"] = float(hit.value.iloc[0])
                    row[f"diff_{role}"] = v - float(hit.value.iloc[0])
            draws = rnd[rnd.k == k]
            if not draws.empty:
                per_draw = role_scores(draws, roles, "draw")
                row["random_draws"] = len(per_draw)
                for role in [c for c in per_draw.columns if not c.endswith("_filter")]:
                    m, lo, hi = spread(per_draw[role])
                    row.update({f"random_{role}": m, f"random_{role}_min": lo, f"random_{role}_max": hi})
            rows.append(row)
    out = pd.DataFrame(rows)
    if "random_draws" in out:
        out["random_draws"] = out["random_draws"].astype("Int64")
    return out


def topk_markdown(table: pd.DataFrame) -> pd.DataFrame:
    """The top-k table for reading: each role's ranked score, and beside it the random control as
    "mean [min, max]" over its draws (paper_/diff_ columns kept)."""
    out = table[[c for c in table.columns if not c.startswith("random_")]].copy()
    if "random_draws" not in table:
        return out
    for role in _role_columns(table):
        if f"random_{role}" in table:
            out.insert(list(out.columns).index(role) + 1, f"random_{role}",
                       [fmt_spread(m, lo, hi, ".3f" if role.endswith("_ppl") else ".1f") for m, lo, hi in
                        zip(table[f"random_{role}"], table[f"random_{role}_min"], table[f"random_{role}_max"])])
    out.insert(2, "random_draws", table["random_draws"].astype(object).where(table["random_draws"].notna(), ""))
    return out


def topk_figure(table: pd.DataFrame):
    acc_roles = [r for r in _role_columns(table) if not r.endswith("_ppl")]
    fig, axes = plt.subplots(1, table.model.nunique(), figsize=(4 * table.model.nunique(), 3.2), squeeze=False)
    random = "random_draws" in table and table.random_draws.notna().any()
    fig.suptitle("Removing the top-k KV-retrieval heads" + (" (solid) vs k random heads (dashed: mean, bars: "
                                                              "min-max over draws)" if random else ""), fontsize=10)
    for ax, (model, sub) in zip(axes[0], table.groupby("model", sort=False)):
        for i, role in enumerate(acc_roles):
            colour = f"C{i}"
            ax.plot(sub.k, sub[role], "o-", c=colour, label=role)
            if f"random_{role}" in sub and sub[f"random_{role}"].notna().any():
                r = sub[sub[f"random_{role}"].notna()]
                # the random control starts where ranked removal does: k = 0 is the same model
                base = sub[sub.k == 0]
                x = list(base.k) + list(r.k)
                y = list(base[role]) + list(r[f"random_{role}"])
                lo = [0.0] * len(base) + list(r[f"random_{role}"] - r[f"random_{role}_min"])
                hi = [0.0] * len(base) + list(r[f"random_{role}_max"] - r[f"random_{role}"])
                ax.errorbar(x, y, yerr=[lo, hi], fmt="s--", c=colour, alpha=0.6, capsize=3, ms=3)
        ax.set(title=model, xlabel="heads removed (k)", ylabel="score (%)", ylim=(0, 102))
        ax.set_xticks(sorted(sub.k.unique()))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def make_topk(models, paths, roles, paper_keys, file, title, png, pdf, csv, md):
    tables = {m: pd.concat([pd.read_csv(p) for p in ps], ignore_index=True) for m, ps in zip(models, paths)}
    table = topk_table(tables, roles, paper_keys, file)
    if png:
        save_figure(topk_figure(table), png, pdf)
    random = "random_draws" in table
    write_table(table, csv, md, title=title, md_df=topk_markdown(table),
                note="Scores in percent (`*_ppl`: perplexity); k heads removed together, the top k of the KV "
                     "ranking (among the model's `kinds_by_model` where set: Zamba2, attention heads only)."
                     + (" `random_<role>`: the same k drawn at random among the same kinds, mean [min, max] over "
                        "`random_draws` draws (topk_removal.random_draws; the csv has `_min`/`_max` columns)."
                        if random else "")
                     + " `heads_pct`: k as a share of the heads it counts among; the paper removes 10-30 of 512-1024 "
                       "heads (1-6%), and the k lists aim at that share (`k_by_model`); where one head is already "
                       "above 6% (few heads of the kind, e.g. a hybrid's 8 attention heads: 12.5%), k = 1 is the "
                       "closest possible."
                     + " `paper_*` and `diff_*` where the model is the paper's; at micro scale compare shapes, not "
                       "values."
                     + (" `kv`: the positive control, each removal's KV-retrieval accuracy on the probe at the scan's "
                        "pairs, other prompts than the ranking's (topk_removal.kv_control): removing the top KV heads "
                        "should cost it more than removing random ones." if "kv" in table else ""))
