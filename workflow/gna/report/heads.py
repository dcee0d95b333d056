"""Table 1 (head keeping) and Fig. 4 (KV vs pairs), and the role scores every head table reads.

The tables-and-figures layer of the head experiments ``head_keeping`` and ``kv_pairs`` (top-k removal's
tables are :mod:`.topk`, which reads :func:`role_scores` and :func:`one_filter` here, as the layer swap's
does). One concept at two layers: this module makes the tables, :mod:`gna.report.findings.heads` judges
the paper's claims on them (the heads come from :mod:`gna.experiments.head_selection`).
"""
from __future__ import annotations

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
