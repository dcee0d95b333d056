"""The follow-up's hybrid distillation tables and figure: students by heads kept and by SSM state.

``hybrid_heads`` and ``hybrid_state_size``: one row per student, knowledge-focused columns then
retrieval-heavy ones, perplexities last; the random control's draws pooled into a mean with its
min-max spread; the published Llama-3.2-1B hybrid rows beneath ours where the teacher is the
paper's. The figure plots perplexity and KV retrieval against the share of the teacher's heads
kept, so micro and published curves share an axis.

The tables-and-figures layer of the experiment ``hybrid_distillation`` (its computation is
:mod:`gna.hybrid`, the students' training, and :mod:`gna.experiments.hybrid_distillation`, their
evaluation). One concept at three layers: this module makes the tables and figure,
:mod:`gna.report.findings.hybrid_distillation` judges them.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .common import fmt_spread, published, read_csvs, save_figure, spread, write_table

GEN_METRICS = ("acc", "contains", "answer_match", "exact_match")


def _task_score(df: pd.DataFrame, tasks: list[str]) -> tuple[float | None, float | None]:
    """Main score (percent) and perplexity (if any) of ``tasks``, averaged."""
    sub = df[df.task.isin(tasks)]
    score = next((sub[sub.metric == m].value.mean() * 100 for m in GEN_METRICS if (sub.metric == m).any()), None)
    ppl = sub[sub.metric == "perplexity"].value.mean() if (sub.metric == "perplexity").any() else None
    return score, ppl


# The two KV scores of a hybrid: ``kv_retrieval``, mohawk's KV-Ret (row metric "top1": the argmax
# over the vocabulary, gna.probes.top1), the one the published numbers are; ``kv_mc``, the G&A
# multiple choice over the dictionary's values (lm-eval "acc", chance 1 / pairs).
KV_METRICS = {"kv_retrieval": "top1", "kv_mc": "acc"}
KV_METRIC_NAME = "top-1 over the vocabulary (mohawk)"


def _kv_score(sub: pd.DataFrame, metric: str) -> tuple:
    """(mean, min, max over the probe seeds, number of seeds) of one KV metric, percent."""
    kv = sub[(sub.task == "kv_retrieval") & (sub.metric == metric)]
    if kv.empty:
        return None, None, None, 0
    seeds = kv.get("probe_seed", pd.Series(0, index=kv.index)).fillna(0)
    return (*spread(kv.groupby(seeds).value.mean() * 100), int(seeds.nunique()))


def hybrid_rows(df: pd.DataFrame, roles: dict[str, list[str]]) -> pd.DataFrame:
    """One row per variant: knowledge tasks one by one and their mean, then the retrieval-heavy
    columns (LAMBADA, MMLU, GSM8K-like, SWDE-like, BBH-like, KV retrieval), perplexities last."""
    knowledge = roles.get("knowledge", [])
    retrieval = {r: ts for r, ts in roles.items() if r != "knowledge"}
    rows = []
    for variant, sub in df.groupby("variant", sort=False):
        first = sub.iloc[0]
        row = dict(variant=variant, selection=first.selection, k=int(first.k),
                   state_size=None if pd.isna(first.state_size) else int(first.state_size))
        for t in knowledge:
            row[t] = _task_score(sub, [t])[0]
        scores = [row[t] for t in knowledge if row[t] is not None]
        row["knowledge_avg"] = sum(scores) / len(scores) if scores else None
        ppls = {}
        for role, ts in retrieval.items():
            row[role], ppl = _task_score(sub, ts)
            if ppl is not None:
                ppls[f"{role}_ppl"] = ppl
        for col, metric in KV_METRICS.items():
            row[col], row[f"{col}_min"], row[f"{col}_max"], seeds = _kv_score(sub, metric)
        row["kv_metric"] = KV_METRIC_NAME
        row["probe_seeds"] = seeds
        row.update(ppls)
        row["heldout_ppl"] = _task_score(sub, ["heldout"])[1]
        row["kept_heads"] = first.kept_heads
        row["draw"] = None if "draw" not in sub or pd.isna(first.get("draw")) else int(first.draw)
        rows.append(row)
    out = pd.DataFrame(rows)
    out["state_size"] = out.state_size.astype("Int64")
    out["draw"] = out.draw.astype("Int64")
    return out


SPREAD_COLUMNS = ("knowledge_avg", "kv_retrieval", "kv_mc", "heldout_ppl")
"""Columns of the random control's rows that carry a min-max spread over the draws (besides the means)."""


def pool_draws(ours: pd.DataFrame) -> pd.DataFrame:
    """The random control's students pooled: one row per (k, state) with every score the mean over
    the draws, ``<col>_min`` / ``<col>_max`` the spread (min-max over the draws) of SPREAD_COLUMNS
    (KV retrieval: each draw's mean over its probe seeds), ``draws`` their number and ``kept_heads``
    each draw's heads. Ranked and teacher rows keep their own (KV: min-max over the probe seeds)."""
    if "draw" not in ours or ours.draw.isna().all():
        return ours.drop(columns="draw", errors="ignore").assign(draws=pd.NA)
    keep = ours[ours.selection != "random"].assign(draws=pd.NA)
    pooled = []
    for (k, st), sub in ours[ours.selection == "random"].groupby(["k", "state_size"], sort=False):
        row = {c: sub[c].mean() if pd.api.types.is_numeric_dtype(sub[c]) else sub[c].iloc[0] for c in sub.columns}
        for c in SPREAD_COLUMNS:
            if c in sub:
                row[c], row[f"{c}_min"], row[f"{c}_max"] = spread(sub[c])
        row.update(variant=f"k{int(k)}-s{int(st)}-random", selection="random", k=int(k), state_size=int(st),
                   draw=pd.NA, draws=len(sub), probe_seeds=int(sub.probe_seeds.max()),
                   kept_heads="; ".join(f"{int(d)}: {h}" for d, h in zip(sub.draw, sub.kept_heads)))
        pooled.append(row)
    out = pd.concat([keep, pd.DataFrame(pooled)], ignore_index=True).drop(columns="draw")
    for c in ("k", "state_size", "draws"):
        out[c] = out[c].astype("Int64")
    return out


def _published_rows(file: str, model: str, columns, match: dict) -> dict | None:
    pub = published(file)
    sub = pub[pub.model == model]
    for key, value in match.items():
        sub = sub[sub[key] == value]
    if sub.empty:
        return None
    values = dict(zip(sub.metric, sub.value))
    return {c: values.get(c) for c in columns}


def with_published(ours: pd.DataFrame, paper_key: str, file: str, state: bool) -> pd.DataFrame:
    """``ours`` with a ``source`` column, and under each row the published one where there is one."""
    cols = [c for c in ours.columns if c not in ("variant", "selection", "k", "state_size", "kept_heads", "draw",
                                                 "draws", "probe_seeds", "kv_metric", "kv_mc")
            and not c.endswith(("_min", "_max"))]
    out = []
    for r in ours.to_dict("records"):
        out.append({"source": "ours", **r})
        if not paper_key or r["selection"] == "random":
            continue
        if r["selection"] == "teacher":
            pub = _published_rows("hybrid_heads.csv", paper_key, cols, {"attention_heads": r["k"]})
        elif state:
            pub = _published_rows(file, f"hybrid-{paper_key}", cols, {"attention_heads": r["k"],
                                                                        "state_size": r["state_size"]})
        else:
            pub = _published_rows(file, f"hybrid-{paper_key}", cols, {"attention_heads": r["k"]})
        if pub:
            out.append({"source": "paper", **{k: r[k] for k in ("variant", "selection", "k", "state_size")}, **pub,
                        "kv_metric": KV_METRIC_NAME})
    out = pd.DataFrame(out)
    for c in ("k", "state_size", "draw", "draws", "probe_seeds"):
        if c in out:
            out[c] = out[c].astype("Int64")
    return out


def hybrid_figure(table: pd.DataFrame, n_heads: int, paper_key: str):
    """Perplexity and KV retrieval vs the share of the teacher's heads kept; ranked vs random."""
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.3))
    ours = table[table.source == "ours"]
    teacher = ours[ours.selection == "teacher"]
    ppl_cols = [c for c in ("heldout_ppl", "lambada_ppl") if c in ours and ours[c].notna().any()]
    colours = dict(zip(ppl_cols, ("tab:blue", "tab:orange")))
    for sel, style in (("ranked", "o-"), ("random", "s--")):
        sub = ours[ours.selection == sel].sort_values("k")
        x = 100 * sub.k / n_heads
        for c in ppl_cols:
            axes[0].plot(x, sub[c], style, c=colours[c], label=f"{c.removesuffix('_ppl')} ({sel})")
        if "kv_retrieval_min" in sub:  # bars: min-max over the probe seeds (ranked) or the draws (random)
            err = [(sub.kv_retrieval - sub.kv_retrieval_min).fillna(0), (sub.kv_retrieval_max - sub.kv_retrieval).fillna(0)]
        else:
            err = None
        axes[1].errorbar(x, sub.kv_retrieval, yerr=err, fmt=style, capsize=3,
                         c="tab:green" if sel == "ranked" else "tab:purple",
                         label=f"ours ({sel}{', mean of draws' if sel == 'random' else ''})")
        if len(sub) <= 8 and sel == "ranked":  # which heads were kept, where they fit
            for xi, yi, heads in zip(x, sub.kv_retrieval, sub.kept_heads):
                if heads not in ("none", "all") and isinstance(heads, str):
                    axes[1].annotate(heads, (xi, yi), fontsize=6, xytext=(3, -9 if sel == "ranked" else 4),
                                     textcoords="offset points")
    for c in ppl_cols:
        if not teacher.empty:
            axes[0].axhline(teacher[c].iloc[0], ls=":", c=colours[c], label=f"{c.removesuffix('_ppl')} (teacher)")
    if not teacher.empty:
        axes[1].axhline(teacher.kv_retrieval.iloc[0], ls=":", c="gray", label="teacher")
    if paper_key:
        pub = published("hybrid_heads.csv")
        pub = pub[(pub.model == f"hybrid-{paper_key}") & (pub.metric == "kv_retrieval")].sort_values("attention_heads")
        total = float(published("hybrid_heads.csv").query("model == @paper_key").attention_heads.max())
        axes[1].plot(100 * pub.attention_heads / total, pub.value, "x:", c="k", label=f"published (hybrid-{paper_key})")
    axes[0].set(xlabel="attention heads kept (% of the teacher's)", ylabel="perplexity", yscale="log",
                title="Perplexity vs kept heads")
    axes[1].set(xlabel="attention heads kept (% of the teacher's)", ylabel="KV-Ret, top-1 over the vocabulary (%)",
                ylim=(0, 102),
                title="KV retrieval vs kept heads")
    for ax in axes:
        ax.legend(fontsize=7)
        ax.title.set_fontsize(9)
    fig.tight_layout()
    return fig


def hybrid_markdown(table: pd.DataFrame) -> pd.DataFrame:
    """The hybrid table for reading: SPREAD_COLUMNS as "mean [min, max]" where a spread is known."""
    out = table[[c for c in table.columns if not c.endswith(("_min", "_max"))]].copy()
    for c in SPREAD_COLUMNS:
        if f"{c}_min" in table:
            fmt = ".2f" if c.endswith("_ppl") else ".1f"
            out[c] = [fmt_spread(m, lo, hi, fmt) if pd.notna(lo) else ("" if pd.isna(m) else format(m, fmt))
                      for m, lo, hi in zip(table[c], table[f"{c}_min"], table[f"{c}_max"])]
    return out


def make_hybrid(paths, roles, paper_key, state_size, state_k, png, pdf, csv, md, state_csv, state_md):
    df = read_csvs(paths)
    ours = pool_draws(hybrid_rows(df, roles))
    teacher = ours[ours.selection == "teacher"]
    n_heads = int(teacher.k.iloc[0]) if not teacher.empty else int(ours.k.max())
    sweep = ours[(ours.selection != "ranked") | (ours.state_size == state_size)]
    heads = with_published(sweep.sort_values(["selection", "k"], key=lambda s: s.map(
        {"teacher": 2, "ranked": 0, "random": 1}) if s.name == "selection" else s, kind="stable"),
        paper_key, "hybrid_heads.csv", state=False)
    save_figure(hybrid_figure(heads, n_heads, paper_key), png, pdf)
    write_table(heads, csv, md, md_df=hybrid_markdown(heads),
                title="Retrieval-guided hybrid distillation: attention heads kept",
                note=f"Students of the teacher with every layer a discrete Mamba-2 mixer (state {state_size}) plus the "
                     "top-k heads of the KV ranking (`ranked`) or k random heads (`random`), distilled by stages 1-3. "
                     "`random` rows: the mean over `draws` students, each with its own draw of heads (`kept_heads`: "
                     "draw: heads), [min, max] over the draws. KV retrieval, two metrics (`kv_metric` names the first): "
                     "`kv_retrieval` = mohawk's KV-Ret, the top-1 next token over the whole vocabulary at the answer "
                     "position (chance ~0; the published numbers are this metric), `kv_mc` = the G&A multiple choice "
                     "over the dictionary's values (chance 1 / pairs); each the mean over `probe_seeds` probe sets "
                     "(never the ranking's prompts); on ranked and teacher rows [min, max] over those probe sets. "
                     "Knowledge-focused columns first, then retrieval-heavy ones (percent; lm-eval `acc`, or exact "
                     "match / contains for generation tasks), perplexities last (`heldout`: held-out distillation "
                     "data). `paper` rows: the follow-up's Llama-3.2-1B hybrids (teacher row: Llama-3.2-1B), "
                     "where the teacher is the paper's.")
    state = ours[(ours.selection == "ranked") & (ours.k == (state_k if state_k is not None else -1))]
    state = with_published(state.sort_values("state_size"), paper_key, "hybrid_state_size.csv", state=True)
    write_table(state, state_csv, state_md, md_df=hybrid_markdown(state), title=f"Hybrid distillation: SSM state size at k = {state_k} heads",
                note="Same layout as hybrid_heads (`kv_retrieval`: mohawk's top-1 KV-Ret; `kv_mc`: the multiple "
                     "choice). Published (Llama-3.2-1B, 20 heads): KV-Ret 72.6 / 90.0 / 99.3 at state 4 / 8 / 64.")
    return heads, state
