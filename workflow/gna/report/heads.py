"""Table 1 (head keeping), Fig. 4 (KV vs pairs), slide tables (top-k removal, ARC chat vs regular).

One concept at two layers: this module makes the head experiments' tables, :mod:`gna.report.findings.heads`
judges the paper's claims on them (the heads come from :mod:`gna.experiments.head_selection`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..experiments.pruning import metric_by
from .common import fmt_spread, model_panels, published, save_figure, spread, write_table

FILTER_ORDER = ("none", "strict-match", "flexible-extract")


def one_filter(sub: pd.DataFrame, metric: str, report_filter: str) -> tuple[pd.DataFrame, str]:
    """The rows of ``metric`` under one lm-eval filter: ``report_filter`` where it is there, else
    the first of FILTER_ORDER present (results keep every filter; a table shows one, named)."""
    rows = sub[sub.metric == metric]
    if "filter" not in rows or rows["filter"].isna().all():
        return rows, "none"
    present = list(dict.fromkeys(rows["filter"].dropna()))
    chosen = report_filter if report_filter in present else next(
        (f for f in FILTER_ORDER if f in present), present[0])
    return rows[rows["filter"] == chosen], chosen


def role_scores(df: pd.DataFrame, roles: dict[str, list[str]], key: str,
                report_filter: str = "strict-match") -> pd.DataFrame:
    """Per value of ``key``: one column per role, the role's main metric averaged over its tasks
    (accuracy or exact match), in percent. A LAMBADA-like task adds ``<role>_ppl``, its perplexity
    (the slides' score for it), beside its accuracy over the same items: an accuracy has a count and
    an interval, a table's perplexity neither. Where the metric comes under an lm-eval filter other
    than none (gsm8k), a ``<role>_filter`` column names the one shown."""
    cols = {}
    for role, tasks in roles.items():
        sub = df[df.task.isin(tasks)]
        if (sub.metric == "perplexity").any():
            rows, _ = one_filter(sub, "perplexity", report_filter)
            cols[f"{role}_ppl"] = metric_by(rows, key, tasks, "perplexity")
        for metric in ("acc", "contains", "answer_match", "exact_match"):
            if (sub.metric == metric).any():
                rows, chosen = one_filter(sub, metric, report_filter)
                cols[role] = metric_by(rows, key, tasks, metric) * 100
                if chosen != "none":
                    cols[f"{role}_filter"] = pd.Series(chosen, index=cols[role].index)
                break
    return pd.DataFrame(cols)


def head_keeping_table(tables: dict[str, pd.DataFrame], roles) -> pd.DataFrame:
    """One row per (model, head source, condition): the kept heads, MMLU and knowledge, and the
    paper's Table 1 beside (Llama-3.1-8B, L16 keeps H22 / L17 keeps H24). A source without a
    critical layer pair gets one row per condition saying so, with no scores."""
    pub = published("head_keeping.csv")
    rows = []
    for model, df in tables.items():
        for (source, cond), sub in df.groupby(["source", "condition"], sort=False):
            first = sub.iloc[0]
            row = dict(model=model, source=source, condition=cond,
                       gather=first.get("gather", ""), aggregate=first.get("aggregate", ""), kept=first.get("kept", ""),
                       **({"unclassified": first.get("unclassified")} if "unclassified" in sub else {}))
            if "task" in sub and sub.task.notna().any():
                row.update(role_scores(sub.assign(k=0), roles, "k").iloc[0].to_dict())
            else:
                row["note"] = first.get("note", "not run")
            rows.append(row)
    out = pd.DataFrame(rows)
    paper = {"both": ("22", "24"), "aggregate_only": ("none", "24"), "gather_only": ("22", "none"),
             "neither": ("none", "none")}
    for role in ("mmlu", "knowledge"):
        out[f"paper_{role}"] = [float(pub[(pub.l16_kept == paper[c][0]) & (pub.l17_kept == paper[c][1])
                                          & (pub.metric == role)].value.iloc[0]) for c in out.condition]
    return out


def kv_pairs_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (model, condition, pairs): KV accuracy, mean and min-max over the probe seeds,
    and (without a head) the drop from the full model on the same probe sets, mean and min-max."""
    flat = pd.concat(tables.values(), ignore_index=True)
    flat = flat[flat.metric == "acc"].copy()
    if "probe_seed" not in flat:
        flat["probe_seed"] = 0
    full = flat[flat.condition == "full"].set_index(["model", "n_pairs", "probe_seed"]).value
    rows = []
    for (model, cond, n), sub in flat.groupby(["model", "condition", "n_pairs"], sort=False):
        acc = spread(sub.value)
        row = dict(model=model, condition=cond, head=sub["head"].iloc[0],
                   **({"heads_from": sub["heads_from"].iloc[0]} if "heads_from" in sub else {}),
                   n_pairs=int(n), accuracy=acc[0], accuracy_min=acc[1], accuracy_max=acc[2], probe_seeds=len(sub))
        drops = [full.get((model, n, s)) - v for s, v in zip(sub.probe_seed, sub.value)
                 if (model, n, s) in full.index] if cond != "full" else []
        d = spread(drops) if drops else (float("nan"),) * 3
        row.update(drop=d[0], drop_min=d[1], drop_max=d[2])
        rows.append(row)
    order = {"full": 0, "no_gather": 1, "no_aggregate": 2}
    out = pd.DataFrame(rows)
    return out.sort_values(["model", "condition", "n_pairs"], key=lambda c: c.map(order) if c.name == "condition"
                           else (c.map({m: i for i, m in enumerate(tables)}) if c.name == "model" else c),
                           kind="stable").reset_index(drop=True)


def kv_pairs_figure(table: pd.DataFrame):
    fig, panels = model_panels(table, "KV retrieval vs number of pairs (Fig. 4); bars: min-max over probe seeds; "
                                       "L3H2 = layer 3, head 2 (from 0)")
    for model, df, ax in panels:
        for cond, sub in df.groupby("condition", sort=False):
            sub = sub.sort_values("n_pairs")
            err = [sub.accuracy - sub.accuracy_min, sub.accuracy_max - sub.accuracy]
            ax.errorbar(sub.n_pairs, sub.accuracy, yerr=err, fmt="o-", capsize=3,
                        label=f"{cond} ({sub['head'].iloc[0]})")
        pairs = sorted(df.n_pairs.unique())
        ax.plot(pairs, [1 / n for n in pairs], ":", c="gray", label="chance")
        ax.set(title=model, xlabel="pairs in the dictionary", ylabel="accuracy", ylim=(0, 1.02))
        ax.set_xticks(pairs)  # whole numbers of pairs, not 2.5
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


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


def make_head_keeping(models, paths, roles, csv, md):
    tables = {m: pd.concat([pd.read_csv(p) for p in ps], ignore_index=True) for m, ps in zip(models, paths)}
    table = head_keeping_table(tables, roles)
    # the variants a study ran, said where they are there (a table without them reads as before)
    extra = ((" `scan`: the KV scan's top Gather head and top Aggregate-pattern head, each kept alone in its "
              "layer, whether or not a layer is critical." if (table.source == "scan").any() else "")
             + (" With one critical layer its heads stand under `gather` and only `both` and `neither` run; "
                "with none, the MMLU search is n/a (not run on other layers)."
                if "note" in table and table.note.astype(str).str.contains("critical layer").any() else ""))
    write_table(table, csv, md, title="Head keeping in the critical layers (Table 1)",
                note="Minimal model; in the G&A layers keep only the Gather and/or Aggregate heads, or none; "
                     "every other layer untouched. `named`: the config's heads (the paper's); `discovered`: in "
                     "each of the two critical layers, the head whose removal alone costs MMLU most."
                     + extra + " `paper_*`: Llama-3.1-8B, L16 keeps H22 / L17 keeps H24 (percent).")


def make_kv_pairs(models, paths, png, pdf, csv, md):
    tables = {m: pd.concat([pd.read_csv(p) for p in ps], ignore_index=True) for m, ps in zip(models, paths)}
    table = kv_pairs_table(tables)
    save_figure(kv_pairs_figure(table), png, pdf)
    view = table[["model", "condition", "head", *(["heads_from"] if "heads_from" in table else []), "n_pairs",
                  "probe_seeds"]].copy()
    view["accuracy [min, max]"] = [fmt_spread(*v, ".3f") for v in
                                   zip(table.accuracy, table.accuracy_min, table.accuracy_max)]
    view["drop [min, max]"] = [fmt_spread(*v, ".3f") for v in zip(table["drop"], table.drop_min, table.drop_max)]
    write_table(table, csv, md, title="KV retrieval vs pairs (Fig. 4)", md_df=view,
                note="Accuracy: mean over the probe seeds (`probe_seeds` probe sets per row, other prompts than "
                     "the ranking's), [min, max] over them; `drop`: the full model's accuracy minus this "
                     "condition's on the same probe set; `heads_from`: classified (the scan's top head in the "
                     "role), pattern, unclassified (its pattern is the role's, the ranking left it unclassified) "
                     "or named (the config's). Published (Llama-3.1-8B): removing the Gather head "
                     "(L16H22) costs a constant amount; removing the Aggregate head (L17H24) costs more as pairs grow.")


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
