"""The open questions' figures and tables in figures/ (PNG, PDF, CSV, Markdown), from the rules' rows."""
from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..io import write_csv, write_text  # noqa: E402
from ..report.common import markdown_table, read_csvs, save_figure, with_precision  # noqa: E402
from .names import set_name  # noqa: E402

ROLE_TAG = {"gather": "G", "aggregate": "A"}


def roles(ga_paths) -> dict[tuple[str, str], str]:
    """(model, head name) -> its G&A tag (G, A, or '') from the scan's classified top heads."""
    out = {}
    for path in ga_paths:
        for r in pd.read_csv(path).itertuples():
            out[(r.model, set_name([(r.layer, r.head, r.kind)]))] = ROLE_TAG.get(str(r.role), "")
    return out


def _label(model, head, tags):
    tag = tags.get((model, head), "")
    return f"{head} ({tag})" if tag else head


def head_pairs(pair_paths, minimal_paths, ga_paths, png, pdf, csv, md, minimal_csv) -> None:
    pairs, minimal, tags = read_csvs(pair_paths), read_csvs(minimal_paths), roles(ga_paths)
    models = list(dict.fromkeys(pairs.model))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.6), squeeze=False,
                             gridspec_kw={"wspace": 0.45})
    fig.suptitle("Pair interaction on KV accuracy: drop(a, b) - drop(a) - drop(b)\n(red: super-additive, "
                 "complementary; blue: sub-additive, redundant or in series)", fontsize=9)
    for m, ax in zip(models, axes[0]):
        sub = pairs[pairs.model == m]
        heads = list(dict.fromkeys(sub.sort_values("rank_a").head_a.tolist() + sub.sort_values("rank_b").head_b.tolist()))
        idx = {h: i for i, h in enumerate(heads)}
        mat = np.full((len(heads), len(heads)), np.nan)
        for r in sub.itertuples():
            mat[idx[r.head_a], idx[r.head_b]] = mat[idx[r.head_b], idx[r.head_a]] = r.interaction
        lim = max(0.05, float(np.nanmax(np.abs(mat))))
        im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim)
        labels = [_label(m, h, tags) for h in heads]
        ax.set_xticks(range(len(heads)), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(len(heads)), labels, fontsize=7)
        ax.set_title(f"{m} (top {len(heads)} by single-head rank)", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="interaction (accuracy)")
    save_figure(fig, png, pdf)
    keep = ["model", "head_a", "head_b", "drop_a", "drop_b", "drop_ab", "interaction", "margin_interaction"]
    table = pairs[keep + ["n_examples", "probe_sha256"]]
    ext = pd.concat([pairs.loc[pairs.groupby("model").interaction.idxmin()],
                     pairs.loc[pairs.groupby("model").interaction.idxmax()]]).sort_values(["model", "interaction"])
    last = minimal.groupby("model").tail(1)
    greedy = last[["model", "step", "greedy_set", "greedy_accuracy", "topk_set", "topk_accuracy", "chance",
                   "reached"]].rename(columns={"step": "size"})
    text = ("# Head pairs: complementary or redundant\n\n"
            "The most redundant and the most complementary pair of each model's top heads "
            "(interaction = drop(a, b) - drop(a) - drop(b), accuracy; margin: the same on the log-prob margin).\n\n"
            + markdown_table(with_precision(ext[keep]))
            + "\n## The smallest head set that takes KV retrieval to chance\n\n"
            "Grown greedily by exact ablation, beside the top-k of the same size by single-head rank.\n\n"
            + markdown_table(with_precision(greedy)))
    write_csv(with_precision(table), csv)
    write_csv(with_precision(minimal), minimal_csv)
    write_text(text, md)


def probe_formats(ranking_paths, across_paths, top_k, png, pdf, csv, md) -> None:
    """Per model: the ranks of the top heads across formats in every format (a heat map, the rank in
    each cell), the rank correlations, the format-sensitive heads."""
    from .formats import rank_correlations

    rankings, across = read_csvs(ranking_paths), read_csvs(across_paths)
    models = list(dict.fromkeys(across.model))
    formats = list(dict.fromkeys(rankings.format))
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 4.4), squeeze=False)
    fig.suptitle("A head's rank in each prompt format\n(rows: the top heads by worst rank over the formats "
                 "above chance; * format-sensitive)", fontsize=9, y=1.06)
    corr_rows, base_rows = [], []
    for m, ax in zip(models, axes[0]):
        sub = across[across.model == m].sort_values("rank").head(max(top_k, 8))
        mat = sub[[f"rank_{f}" for f in formats]].to_numpy(dtype=float)
        ax.imshow(mat, cmap="viridis_r", vmin=1, vmax=max(2 * top_k, 2), aspect="auto")
        for (y, x), v in np.ndenumerate(mat):
            ax.text(x, y, f"{int(v)}", ha="center", va="center", fontsize=7, color="k" if v <= top_k else "w")
        base = rankings[rankings.model == m].groupby("format", sort=False).agg(
            baseline=("baseline_accuracy", "first"), chance=("chance", "first"))
        ax.set_xticks(range(len(formats)), [f"{f}\n{base.baseline[f]:.2f}" for f in formats], fontsize=7)
        ax.set_yticks(range(len(sub)), [set_name([(r.layer, r.head, r.kind)]) + (" *" if r.format_sensitive else "")
                                        for r in sub.itertuples()], fontsize=7)
        used = str(sub.formats_used.iloc[0])
        ax.set_title(f"{m}\n(baseline accuracy under each format; ranked on {used})", fontsize=8)
        corr = rank_correlations(rankings[rankings.model == m], top_k).assign(model=m)
        corr_rows.append(corr)
        base_rows.append(base.reset_index().assign(model=m, used=lambda d: d.format.isin(used.split("+"))))
    save_figure(fig, png, pdf)
    corr, base = pd.concat(corr_rows), pd.concat(base_rows)
    sens = across[across.format_sensitive & (across[[c for c in across if c.startswith("rank_")]].min(axis=1) <= top_k)]
    keep = ["model", "rank", "layer", "head", "kind", "worst_rank", "mean_rank", "format_sensitive", "formats_used"]
    keep += [c for c in across.columns if c.startswith("rank_") or c.startswith("drop_")]
    write_csv(with_precision(across[keep]), csv)
    text = ("# Format-sensitive heads\n\nOne KV retrieval in several prompt formats on the same keys and values. "
            "Baseline accuracy per format (a format enters the ranking across formats when above chance):\n\n"
            + markdown_table(with_precision(base[["model", "format", "baseline", "chance", "used"]]))
            + f"\n## Rank correlation between formats (Spearman, every head) and top-{top_k} overlap\n\n"
            + markdown_table(with_precision(corr[["model", "format_a", "format_b", "spearman", "topk_overlap"]]))
            + f"\n## The strongest across formats (by worst rank), top {top_k}\n\n"
            + markdown_table(with_precision(across.groupby("model").head(top_k)[keep[:8]]))
            + f"\n## Format-sensitive heads: in one format's top {top_k} and not in another's\n\n"
            + (markdown_table(with_precision(sens[keep[:5] + [c for c in keep if c.startswith("rank_")]]))
               if len(sens) else "none\n"))
    write_text(text, md)


def ranking_seeds(spread_paths, top_k, png, pdf, csv, md) -> None:
    """Per model: the top heads' mean rank over probe seeds with min-max bars; the top-k overlap."""
    spread = read_csvs(spread_paths)
    models = list(dict.fromkeys(spread.model))
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.4), squeeze=False)
    fig.suptitle("Rank over probe seeds: mean, min-max bars (lower is stronger)", fontsize=9)
    for m, ax in zip(models, axes[0]):
        sub = spread[spread.model == m].head(top_k)
        x = np.arange(len(sub))
        ax.errorbar(x, sub.mean_rank, yerr=[sub.mean_rank - sub.min_rank, sub.max_rank - sub.mean_rank],
                    fmt="o", capsize=3)
        ax.set_xticks(x, [set_name([(r.layer, r.head, r.kind)]) for r in sub.itertuples()], rotation=90, fontsize=7)
        ax.set_ylabel("rank")
        ax.invert_yaxis()
        ax.set_title(f"{m}: top-{int(sub.top_k.iloc[0])} overlap {sub.topk_overlap.iloc[0]:.2f} "
                     f"(min {sub.topk_overlap_min.iloc[0]:.2f}), seeds {sub.seeds.iloc[0]}", fontsize=8)
    save_figure(fig, png, pdf)
    write_csv(with_precision(spread), csv)
    cols = ["model", "layer", "head", "kind"] + [c for c in spread.columns if re.fullmatch(r"rank_s\d+", c)]
    cols += ["mean_rank", "rank_spread", "mean_drop", "min_drop", "max_drop"]
    summary = spread.drop_duplicates("model")[["model", "seeds", "top_k", "topk_overlap", "topk_overlap_min",
                                               "probe_sha256"]]
    text = ("# Rankings over probe seeds\n\nThe exact scan on the KV probes of several seeds (probe files named by "
            "the first 12 hex digits of their sha256). Top-k overlap: the share of one seed's top k in another's, "
            "mean and min over every two seeds.\n\n" + markdown_table(with_precision(summary))
            + f"\n## The top {top_k} heads by mean rank\n\n"
            + markdown_table(with_precision(spread.groupby("model").head(top_k)[cols])))
    write_text(text, md)


def ga_paths(paths, png, pdf, csv, md) -> None:
    """Per model: the G-to-A matrix of path-patched KV drops, each cell beside the whole-head drops."""
    rows = read_csvs(paths)
    models = list(dict.fromkeys(rows.model))
    fig, axes = plt.subplots(1, len(models), figsize=(4.4 * len(models), 3.6), squeeze=False)
    fig.suptitle("KV accuracy drop with Gather g removed only from Aggregate a's keys and values\n"
                 "(each cell: every path g -> a's K/V / the direct path alone)", fontsize=9)
    for m, ax in zip(models, axes[0]):
        sub = rows[rows.model == m]
        gs, As = list(dict.fromkeys(sub.sender)), list(dict.fromkeys(sub.receiver))
        mat = np.full((len(gs), len(As)), np.nan)
        for r in sub.itertuples():
            mat[gs.index(r.sender), As.index(r.receiver)] = r.drop_all_paths
        direct = {(r.sender, r.receiver): r.drop for r in sub.itertuples()}
        ax.imshow(mat, cmap="Reds", vmin=0, vmax=max(0.05, float(np.nanmax(mat))))
        for (y, x), v in np.ndenumerate(mat):
            if not np.isnan(v):
                ax.text(x, y, f"{v:.2f} / {direct[(gs[y], As[x])]:.2f}", ha="center", va="center", fontsize=8)
        whole = sub.drop_duplicates("sender").set_index("sender").sender_ablated_drop
        wa = sub.drop_duplicates("receiver").set_index("receiver").receiver_ablated_drop
        ax.set_yticks(range(len(gs)), [f"{g} (G, whole {whole[g]:.2f})" for g in gs], fontsize=7)
        ax.set_xticks(range(len(As)), [f"{a}\n(A, whole {wa[a]:.2f})" for a in As], fontsize=7)
        ax.set_title(m, fontsize=9)
    save_figure(fig, png, pdf)
    keep = ["model", "sender", "receiver", "drop_all_paths", "drop", "margin_drop_all_paths", "margin_drop",
            "sender_ablated_drop", "receiver_ablated_drop", "kv_group", "baseline_accuracy", "n_examples"]
    write_csv(with_precision(rows[keep]), csv)
    write_text("# Which Gather feeds which Aggregate\n\nPath patching: a Gather head's output removed only from "
               "an Aggregate head's keys and values (the rest of the model reads it), against ablating each head "
               "whole (plain zero ablation). drop_all_paths: the Aggregate's K/V read the stream as it is without "
               "the Gather; drop: its direct write alone removed.\n\n" + markdown_table(with_precision(rows[keep])), md)
