"""Table 1 (head keeping), Fig. 4 (KV vs pairs), slide tables (top-k removal, ARC chat vs regular)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..experiments.pruning import metric_by
from .common import published, save_figure, write_table

ROLE_TASKS = ("mmlu", "knowledge")


FILTER_ORDER = ("none", "strict-match", "flexible-extract")


def _one_filter(sub: pd.DataFrame, metric: str, report_filter: str) -> tuple[pd.DataFrame, str]:
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
    (perplexity for LAMBADA-like tasks, accuracy or exact match otherwise), in percent. Where the
    metric comes under an lm-eval filter other than none (gsm8k), a ``<role>_filter`` column
    names the one shown."""
    cols = {}
    for role, tasks in roles.items():
        sub = df[df.task.isin(tasks)]
        for metric in ("perplexity", "acc", "contains", "answer_match", "exact_match"):
            if (sub.metric == metric).any():
                scale = 1 if metric == "perplexity" else 100
                rows, chosen = _one_filter(sub, metric, report_filter)
                cols[role if metric != "perplexity" else f"{role}_ppl"] = metric_by(rows, key, tasks, metric) * scale
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
                       gather=first.get("gather", ""), aggregate=first.get("aggregate", ""), kept=first.get("kept", ""))
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


def kv_pairs_figure(tables: dict[str, pd.DataFrame]):
    fig, axes = plt.subplots(1, len(tables), figsize=(4 * len(tables), 3.2), squeeze=False)
    fig.suptitle("KV retrieval vs number of pairs (Fig. 4)", fontsize=10)
    for ax, (model, df) in zip(axes[0], tables.items()):
        for cond, sub in df[df.metric == "acc"].groupby("condition"):
            sub = sub.sort_values("n_pairs")
            ax.plot(sub.n_pairs, sub.value, "o-", label=f"{cond} ({sub['head'].iloc[0]})")
        pairs = sorted(df.dropna(subset=["n_pairs"]).n_pairs.unique())
        ax.plot(pairs, [1 / n for n in pairs], ":", c="gray", label="chance")
        ax.set(title=model, xlabel="pairs in the dictionary", ylabel="accuracy", ylim=(0, 1.02))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def topk_table(tables: dict[str, pd.DataFrame], roles, paper_keys: dict[str, str], file: str) -> pd.DataFrame:
    """One row per (model, k): our role scores; where the model is the paper's, published beside."""
    pub = published(file)
    rows = []
    for model, df in tables.items():
        scores = role_scores(df, roles, "k")
        ref = pub[pub.model == paper_keys.get(model, "")]
        for k, r in scores.iterrows():
            row = dict(model=model, k=int(k), **r.to_dict())
            for role, v in r.items():
                hit = ref[(ref.heads_removed == k) & (ref.metric == role)]
                if not hit.empty:
                    row[f"paper_{role}"] = float(hit.value.iloc[0])
                    row[f"diff_{role}"] = v - float(hit.value.iloc[0])
            rows.append(row)
    return pd.DataFrame(rows)


def topk_figure(table: pd.DataFrame):
    roles = [c for c in table.columns if c not in ("model", "k") and not c.startswith(("paper_", "diff_"))
             and not c.endswith("_filter")]
    acc_roles = [r for r in roles if not r.endswith("_ppl")]
    fig, axes = plt.subplots(1, table.model.nunique(), figsize=(4 * table.model.nunique(), 3.2), squeeze=False)
    fig.suptitle("Removing the top-k KV-retrieval heads", fontsize=10)
    for ax, (model, sub) in zip(axes[0], table.groupby("model", sort=False)):
        for role in acc_roles:
            ax.plot(sub.k, sub[role], "o-", label=role)
        ax.set(title=model, xlabel="heads removed (k)", ylabel="score (%)", ylim=(0, 102))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def make_head_keeping(models, paths, roles, csv, md):
    tables = {m: pd.concat([pd.read_csv(p) for p in ps], ignore_index=True) for m, ps in zip(models, paths)}
    write_table(head_keeping_table(tables, roles), csv, md, title="Head keeping in the critical layers (Table 1)",
                note="Minimal model; in the G&A layers keep only the Gather and/or Aggregate heads, or none; "
                     "every other layer untouched. `named`: the config's heads (the paper's); `discovered`: in "
                     "each of the two critical layers, the head whose removal alone costs MMLU most. "
                     "`paper_*`: Llama-3.1-8B, L16 keeps H22 / L17 keeps H24 (percent).")


def make_kv_pairs(models, paths, png, pdf, csv, md):
    tables = {m: pd.concat([pd.read_csv(p) for p in ps], ignore_index=True) for m, ps in zip(models, paths)}
    save_figure(kv_pairs_figure(tables), png, pdf)
    flat = pd.concat(tables.values(), ignore_index=True)
    flat = flat[flat.metric == "acc"][["model", "condition", "head", "n_pairs", "value"]]
    write_table(flat.rename(columns={"value": "accuracy"}), csv, md, title="KV retrieval vs pairs (Fig. 4)",
                note="Published (Llama-3.1-8B): removing the Gather head (L16H22) costs a constant amount; "
                     "removing the Aggregate head (L17H24) costs more as pairs grow.")


def make_topk(models, paths, roles, paper_keys, file, title, png, pdf, csv, md):
    tables = {m: pd.concat([pd.read_csv(p) for p in ps], ignore_index=True) for m, ps in zip(models, paths)}
    table = topk_table(tables, roles, paper_keys, file)
    if png:
        save_figure(topk_figure(table), png, pdf)
    write_table(table, csv, md, title=title,
                note="Scores in percent (`*_ppl`: perplexity). `paper_*` and `diff_*` where the model is the "
                     "paper's; at micro scale compare shapes, not values.")
