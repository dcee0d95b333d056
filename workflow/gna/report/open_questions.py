"""The open questions' figures and tables in figures/ (PNG, PDF, CSV, Markdown), from the rules' rows.

The tables-and-figures layer of the open questions (``head_pairs``, ``probe_formats``, ``ranking_seeds``,
``ga_paths``). One concept at three layers, for the family: :mod:`gna.questions` computes the rows, this module draws
them, :mod:`gna.report.findings.open_questions` judges them.
"""
from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..io import write_csv, write_text  # noqa: E402
from ..questions.names import set_name  # noqa: E402
from .common import markdown_table, read_csvs, save_figure, with_precision  # noqa: E402

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
    fig.suptitle("Pair interaction against independence on the above-chance scale: drop(a, b) - expected drop\n"
                 "(red: redundant, one covers for the other; blue: overlapping, in series or one mechanism; * beyond the interval)", fontsize=9)
    for m, ax in zip(models, axes[0]):
        sub = pairs[pairs.model == m]
        heads = list(dict.fromkeys(sub.sort_values("rank_a").head_a.tolist() + sub.sort_values("rank_b").head_b.tolist()))
        idx = {h: i for i, h in enumerate(heads)}
        mat = np.full((len(heads), len(heads)), np.nan)
        for r in sub.itertuples():
            mat[idx[r.head_a], idx[r.head_b]] = mat[idx[r.head_b], idx[r.head_a]] = r.interaction
            if r.reading != "not resolved":
                for y, x in ((idx[r.head_a], idx[r.head_b]), (idx[r.head_b], idx[r.head_a])):
                    ax.text(x, y, "*", ha="center", va="center", fontsize=10)
        lim = max(0.05, float(np.nanmax(np.abs(mat))))
        im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim)
        labels = [_label(m, h, tags) for h in heads]
        ax.set_xticks(range(len(heads)), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(len(heads)), labels, fontsize=7)
        ax.set_title(f"{m} (top {len(heads)} by single-head rank, {int(sub.n_examples.iloc[0])} prompts)", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="interaction (accuracy)")
    save_figure(fig, png, pdf)
    keep = ["model", "head_a", "head_b", "drop_a", "drop_b", "drop_ab", "interaction", "interaction_low",
            "interaction_high", "reading", "additive_interaction", "margin_interaction", "margin_interaction_low",
            "margin_interaction_high", "n_examples"]
    table = pairs[keep + ["baseline_accuracy", "chance", "interval_level", "probe_sha256"]]
    last = minimal.groupby("model").tail(1)
    cols = ["model", "size", "sets_tried", "n_reaching", "best_set", "best_accuracy", "best_low", "best_high",
            "topk_set", "topk_accuracy", "topk_low", "topk_high", "chance", "chance_margin", "reached", "pool_rule",
            "n_examples"]
    text = ("# Head pairs against independence\n\n"
            "Each pair of the top heads ablated together. interaction = drop(a, b) minus the drop independence "
            "predicts on the above-chance scale (each head keeping its share of the above-chance accuracy), with a "
            "bootstrap interval over prompts (familywise over the pairs: interval_level); reading: overlapping "
            "(below 0) / redundant (above 0) where the interval excludes 0, else not resolved. additive_interaction, "
            "drop(a, b) - drop(a) - drop(b), is no test (a floor at chance caps it). margin: the additive "
            "interaction on the log-prob margin, with its interval.\n\n"
            + markdown_table(with_precision(pairs[keep]))
            + "\n## The smallest head sets that take KV retrieval to chance\n\n"
            "Every set of the candidate pool, size by size, until one reaches chance + chance_margin; n_reaching: "
            "the sets of that size that reach it (ties); best: the lowest, with its bootstrap interval over "
            "prompts; beside it the top-k of the same size by single-head rank. Every size tried is in "
            "head_pairs_minimal.csv.\n\n" + markdown_table(with_precision(last[[c for c in cols if c in last]])))
    write_csv(with_precision(table), csv)
    write_csv(with_precision(minimal), minimal_csv)
    write_text(text, md)


def probe_formats(ranking_paths, across_paths, top_k, png, pdf, csv, md) -> None:
    """Per model: the ranks of the top heads across formats in every format (a heat map, the rank in
    each cell), the rank correlations, the format-sensitive heads."""
    from ..questions.formats import rank_correlations

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
    """Per model: the heads' pooled rank over prompts and probe seeds with its bootstrap interval (filled:
    drop beyond noise), and each seed's own rank beside it; the top-k overlap."""
    spread = read_csvs(spread_paths)
    models = list(dict.fromkeys(spread.model))
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 3.6), squeeze=False)
    fig.suptitle("Rank over prompts and probe seeds: pooled rank, 95% bootstrap interval (filled: drop beyond "
                 "noise);\nx: each seed's own rank", fontsize=9, y=1.1)
    for m, ax in zip(models, axes[0]):
        sub = spread[spread.model == m].sort_values("pooled_rank").head(max(top_k, 8))
        x = np.arange(len(sub))
        for i, r in enumerate(sub.itertuples()):
            ax.errorbar([i], [r.pooled_rank], yerr=[[r.pooled_rank - r.rank_low], [r.rank_high - r.pooled_rank]],
                        fmt="o", capsize=3, color="C0", mfc="C0" if r.beyond_noise else "white")
        for c in [c for c in sub.columns if re.fullmatch(r"rank_s\d+", c)]:
            ax.plot(x, sub[c], "x", color="grey", ms=4)
        ax.set_xticks(x, [set_name([(r.layer, r.head, r.kind)]) for r in sub.itertuples()], rotation=90, fontsize=7)
        ax.set_ylabel("rank")
        ax.invert_yaxis()
        k = int(sub.stable_k.iloc[0])
        ax.axhline(k + 0.5, color="grey", ls=":")
        ax.set_title(f"{m}: {k} heads beyond noise, top-{k} {'stable' if sub.stable.iloc[0] else 'not resolved'};\n"
                     f"{int(sub.n_prompts.iloc[0])} prompts, seeds {sub.seeds.iloc[0]}", fontsize=8)
    save_figure(fig, png, pdf)
    write_csv(with_precision(spread), csv)
    cols = ["model", "layer", "head", "kind", "pooled_rank", "rank_low", "rank_high", "pooled_drop",
            "pooled_margin_drop", "beyond_noise"] + [c for c in spread.columns if re.fullmatch(r"rank_s\d+", c)]
    cols += ["mean_drop", "min_drop", "max_drop"]
    summary = spread.drop_duplicates("model")[["model", "seeds", "n_prompts", "stable_k", "stable", "top_k",
                                               "topk_overlap", "topk_overlap_min", "probe_sha256"]]
    text = ("# Rankings over probe seeds\n\nThe exact scan on the KV probes of several seeds (probe files named by "
            "the first 12 hex digits of their sha256). pooled_rank: by the drop over every prompt of every seed; "
            "rank_low / rank_high: its 95% bootstrap interval (seeds drawn, then prompts within each); "
            "beyond_noise: exact one-sided McNemar on the pooled prompts, 5% familywise over the heads. stable_k: "
            "the heads beyond noise (at most top_k); stable: their intervals within 1..stable_k and every other "
            "head's above it. Top-k overlap: the share of one seed's top k in another's (mean and min over every "
            "two seeds), which a noise head can pass or fail by chance.\n\n" + markdown_table(with_precision(summary))
            + f"\n## The top {max(top_k, 8)} heads by pooled rank\n\n"
            + markdown_table(with_precision(spread.sort_values(["model", "pooled_rank"]).groupby("model")
                                            .head(max(top_k, 8))[cols])))
    write_text(text, md)


def ga_paths(paths, png, pdf, csv, md) -> None:
    """Per model: every Gather -> Aggregate path's KV drop by component and position, beside the Gather's
    direct path to the logits and its whole ablation."""
    rows = read_csvs(paths)
    rows["path"] = [("to the logits (direct)" if r.target == "logits" else
                     f"{r.components.upper()} @ {r.positions}, {'every path' if r.via == 'all' else 'direct'}")
                    for r in rows.itertuples()]
    models = list(dict.fromkeys(rows.model))
    n_rows = max(len(set(zip(rows.sender[rows.target == "head"], rows.receiver[rows.target == "head"]))), 1)
    fig, axes = plt.subplots(1, len(models), figsize=(7 * len(models), 2.6 + 0.4 * n_rows), squeeze=False)
    fig.suptitle("KV accuracy drop with Gather g removed only from one path (rows: g -> Aggregate a; the last "
                 "column: g's own write to the logits)", fontsize=9)
    for m, ax in zip(models, axes[0]):
        sub = rows[rows.model == m]
        heads = sub[sub.target == "head"]
        cells = list(dict.fromkeys(heads.path)) + ["to the logits (direct)"]
        pairs = list(dict.fromkeys(zip(heads.sender, heads.receiver)))
        mat = np.full((len(pairs), len(cells)), np.nan)
        for r in sub.itertuples():
            for y, (g, a) in enumerate(pairs):
                if r.sender == g and (r.receiver == a or r.target == "logits"):
                    mat[y, cells.index(r.path)] = r.drop
        top = max(0.05, float(np.nanmax(mat)))
        ax.imshow(mat, cmap="Reds", vmin=0, vmax=top, aspect="auto")
        for (y, x), v in np.ndenumerate(mat):
            ax.text(x, y, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v > 0.6 * top else "k")
        whole = sub.drop_duplicates("sender").set_index("sender").sender_ablated_drop
        ax.set_yticks(range(len(pairs)), [f"{g} (whole {whole[g]:.2f}) -> {a}" for g, a in pairs], fontsize=7)
        ax.set_xticks(range(len(cells)), cells, rotation=60, ha="right", fontsize=7)
        ax.set_title(f"{m} ({int(sub.n_examples.iloc[0])} prompts)", fontsize=9)
    save_figure(fig, png, pdf)
    keep = ["model", "sender", "receiver", "target", "via", "components", "positions", "drop", "drop_low", "drop_high",
            "margin_drop", "share_of_sender", "sender_ablated_drop", "sender_ablated_low", "sender_ablated_high",
            "receiver_ablated_drop", "kv_group",
            "baseline_accuracy", "n_examples"]
    write_csv(with_precision(rows[keep]), csv)
    write_text("# Which Gather feeds which Aggregate\n\nPath patching by component and position: a Gather head's "
               "output removed only from what an Aggregate head reads through its query (q), key (k) or value (v), "
               "at every position, at the value tokens or at the positions the answer is read at (final); the rest "
               "of the model reads it. via all: every path from the Gather (the receiver's input as it is with the "
               "Gather ablated); via direct: the Gather's own write alone. target logits: the Gather's own write "
               "removed only from what the final norm and the LM head read, a different path. drop: KV accuracy "
               "lost, with its 95% bootstrap interval over prompts; share_of_sender: of ablating the Gather whole."
               "\n\n" + markdown_table(with_precision(rows[keep])), md)
