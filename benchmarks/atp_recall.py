"""Recall of the exact head ranking against the number of heads ablated, per fast-scan estimator.

For every model (the fast scan's validation models, >= 128 heads each, and the micro models), on a
compact KV probe: the exact scan (every head ablated alone: the ground truth), then each estimator's
order of the heads. ``atp+exact`` ablates an estimator's top ``m`` heads exactly; a head of the exact
top-k is found iff it is among them, so recall@k at budget m = |exact top-k ∩ estimator's top m| / k.
"recall@10 beyond noise" counts only the exact top-10's heads whose accuracy drop is beyond the probe's
noise: an exact one-sided McNemar test of the ablated against the unmodified model on the same prompts
(the prompts whose correctness the ablation changes: ``discordant``), significant at 5% familywise
over the model's heads (Bonferroni: p < 0.05 / heads). The earlier rule, a drop above ``NOISE_Z``
unpaired standard errors of a difference of two accuracies, is counted beside it
(``heads_beyond_unpaired``): it treats the two accuracies as independent samples, so it overstates
the noise of a difference measured on the same prompts several times over.

Estimators (gna.scan.attribution.atp_scan): ``atp`` (margin score, mean |per-example estimate|: the
shipped default), ``atp-logprob`` (the correct choice's log-prob), ``graddrop`` (AtP*'s GradDrop),
``ig4`` (integrated gradients along the joint ablation path, 4 steps, margin score).

Writes ``<out>/curves.csv`` (model, estimator, budget, share, recall@5/@10/@20, recall@10 beyond
noise), ``<out>/summary.md`` (per model and estimator: the budget that reaches recall@10 >= 0.9
beyond noise, and recall at 15% of the heads) and ``docs/img/atp_recall.png`` (``--figure``). The exact rankings are
cached in ``<out>/exact/<model>.csv`` (delete to recompute).

    python benchmarks/atp_recall.py [--models val-llama val-bamba micro-llama ...] [--examples N]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from gna.scan.attribution import atp_scan
from gna.micro.validation_models import VALIDATION_MODELS
from gna.models import load_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, score
from gna.scan import scan_heads, select_mixers
from gna.questions.null import FAMILYWISE_ALPHA, beyond_noise as paired_beyond_noise, mcnemar_p  # noqa: F401  mcnemar_p: this script's API too

ROOT = Path(__file__).resolve().parents[1]
# model -> (probe pairs, prompts, adapter options). The micro models on the micro study's scan probe
# (8 pairs, 200 prompts); the validation models on their spec's probe (harder: more pairs, so more
# heads' drops show; more prompts, so smaller drops clear the noise bar).
MODELS = {**{name: (spec["probe_pairs"], spec.get("probe_examples", 200), {})
             for name, spec in sorted(VALIDATION_MODELS.items())},
          "micro-llama": (8, 200, {}), "micro-mamba2": (8, 200, {}), "micro-zamba2": (8, 200, {})}
ESTIMATORS = {"atp": dict(score="margin"), "atp-logprob": dict(score="logprob"),
              "graddrop": dict(score="margin", graddrop=True), "ig4": dict(score="margin", ig_steps=4)}
DEFAULT = "atp"   # the estimator scan.method atp+exact uses (chosen from these curves: docs/fast-scan.md)
KS = (5, 10, 20)
NOISE_Z = 2.0            # the unpaired rule (reported beside the paired one)
TARGET_RECALL, TARGET_SHARE = 0.9, 0.15
KEY = ["layer", "kind", "head"]


def noise_bar(base_acc: float, acc: pd.Series, n: int) -> pd.Series:
    """NOISE_Z x the unpaired standard error of ``base_acc - acc`` on ``n`` prompts (per head)."""
    return NOISE_Z * ((base_acc * (1 - base_acc) + acc * (1 - acc)) / n) ** 0.5


def beyond_noise(exact: pd.DataFrame) -> pd.Series:
    """Per head of an exact ranking (with ``discordant``): its drop is beyond the probe's noise, at
    ``FAMILYWISE_ALPHA`` familywise over the ranking's heads (:func:`gna.questions.null.beyond_noise`)."""
    ok = paired_beyond_noise(exact["drop"], exact["discordant"], int(exact.n_examples.iloc[0]), tested=len(exact),
                             alpha=FAMILYWISE_ALPHA)
    return pd.Series(ok, index=exact.index)


def beyond_unpaired(exact: pd.DataFrame) -> pd.Series:
    """The unpaired rule: drop > ``noise_bar``."""
    return exact["drop"] > noise_bar(float(exact.baseline_accuracy.iloc[0]), exact["accuracy"],
                                     int(exact.n_examples.iloc[0]))


# The micro models' exact rankings on the micro study's probe, as the test suite holds them
# (tests/test_fast_scan.py): reused rather than recomputed (micro-mamba2's took 17 min on a loaded CPU).
RECORDED = ROOT / "tests" / "data" / "exact_rankings_before_gather.csv"


def exact_ranking(name: str, model, enc, pairs: int, out: Path) -> pd.DataFrame:
    """The exact ranking of ``name`` on ``enc`` (``pairs`` pairs): cached in ``<out>/exact/<name>.csv``,
    recomputed where the cache was made on another probe size."""
    path = out / "exact" / f"{name}.csv"
    if path.is_file():
        cached = pd.read_csv(path)
        if int(cached.n_examples.iloc[0]) == len(enc) and int(cached.get("pairs", pd.Series([pairs])).iloc[0]) == pairs:
            return with_discordant(model, enc, cached, path)
        print(f"{name}: cached exact ranking is of another probe, recomputed", flush=True)
    recorded = pd.read_csv(RECORDED) if RECORDED.is_file() else None
    if recorded is not None and name in set(recorded.model) and len(enc) == 200 and pairs == 8:
        df = recorded[recorded.model == name].copy()
        base = score(model, enc).accuracy
        df["baseline_accuracy"], df["accuracy"], df["n_examples"] = base, base - df["drop"], len(enc)
        df["pairs"] = pairs
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, index=False)
        return with_discordant(model, enc, df, path)
    t = time.perf_counter()
    df = scan_heads(model, enc, model_name=name, progress=False, discordant=True)
    df["seconds"] = time.perf_counter() - t
    df["pairs"] = pairs
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return df


def with_discordant(model, enc, df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``df`` with its ``discordant`` column: where a cached ranking lacks it, the heads whose drop
    is positive (no other can be beyond noise) are ablated again for it, their accuracies checked
    against the cache, and the cache rewritten; the others' stay NaN."""
    if "discordant" not in df:
        df["discordant"] = float("nan")
    todo = df[(df["drop"] > 0) & df["discordant"].isna()]
    if todo.empty:
        return df
    heads = [(int(r.layer), int(r.head), str(r.kind)) for r in todo.itertuples()]
    print(f"  counting discordant prompts of {len(heads)} heads", flush=True)
    again = scan_heads(model, enc, heads=heads, discordant=True, progress=False).set_index(KEY)
    idx = [tuple(r) for r in todo[KEY].itertuples(index=False)]
    gap = (again.loc[idx, "accuracy"].to_numpy() - todo["accuracy"].to_numpy())
    if abs(gap).max() > 1e-9:
        raise RuntimeError(f"re-ablated heads disagree with the cached ranking (max {abs(gap).max():.3g}): {path}")
    df.loc[todo.index, "discordant"] = again.loc[idx, "discordant"].to_numpy()
    df.to_csv(path, index=False)
    return df


def estimator_order(model, enc, estimator: str) -> list[tuple]:
    """Every head as ``(layer, kind, head)``, in ``estimator``'s order (largest estimate first; ties
    by position), as ``atp+exact`` would take its candidates."""
    est = atp_scan(model, enc, select_mixers(model), progress=False, **ESTIMATORS[estimator])
    est = est.sort_values(["atp_magnitude", "layer", "kind", "head"], ascending=[False, True, True, True])
    return [tuple(r) for r in est[KEY].itertuples(index=False)]


def curves(exact: pd.DataFrame, order: list[tuple], n: int) -> list[dict]:
    """Recall rows for every budget m = 1..heads, given an estimator's head order."""
    ex = exact.sort_values("rank")
    keys = [tuple(r) for r in ex[KEY].itertuples(index=False)]
    beyond = beyond_noise(ex).tolist()
    top10_noise = {k for k, b in zip(keys[:10], beyond[:10]) if b}
    pos = {h: i for i, h in enumerate(order)}
    rows = []
    for m in range(1, len(order) + 1):
        row = dict(budget=m, share=m / len(order))
        for k in KS:
            kk = min(k, len(keys))
            row[f"recall@{k}"] = sum(pos[h] < m for h in keys[:kk]) / kk
        row["recall@10_noise"] = (sum(pos[h] < m for h in top10_noise) / len(top10_noise)
                                  if top10_noise else float("nan"))
        row["n_top10_beyond_noise"] = len(top10_noise)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--estimators", nargs="+", default=list(ESTIMATORS))
    ap.add_argument("--examples", type=int, default=None,
                    help="prompts per probe (default: each model's, MODELS)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "atp_recall")
    ap.add_argument("--figure", type=Path, default=ROOT / "docs" / "img" / "atp_recall.png",
                    help="the recall curves (default: the manual's copy, shown on its fast-scan page)")
    ap.add_argument("--tables-only", action="store_true",
                    help="rewrite the tables and the figure from the saved curves.csv and models.csv; no model runs")
    args = ap.parse_args()
    if args.tables_only:
        write_summary(pd.read_csv(args.out / "curves.csv"), pd.read_csv(args.out / "models.csv"), args.out, args.figure)
        return
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    all_rows, info = [], []   # earlier runs' other models are kept: one table for every model
    if (args.out / "curves.csv").is_file() and (args.out / "models.csv").is_file():
        all_rows = [r for r in pd.read_csv(args.out / "curves.csv").to_dict("records") if r["model"] not in args.models]
        info = [r for r in pd.read_csv(args.out / "models.csv").to_dict("records") if r["model"] not in args.models]
    for name in args.models:
        pairs, examples, opts = MODELS[name]
        examples = args.examples or examples
        path = ROOT / "data" / "models" / name
        if not path.is_dir():
            print(f"{name}: {path} missing, skipped", flush=True)
            continue
        model, tok = load_model({"path": str(path), "adapter_options": opts})
        enc = encode(generate_kv_probe(pairs, examples, 0, separator=" ", fmt="compact"), tok)
        exact = exact_ranking(name, model, enc, pairs, args.out)
        base = float(exact.baseline_accuracy.iloc[0])
        n_beyond, n_unpaired = int(beyond_noise(exact).sum()), int(beyond_unpaired(exact).sum())
        info.append(dict(model=name, heads=len(exact), pairs=pairs, examples=len(enc), baseline=base,
                         chance=1 / pairs, heads_beyond_noise=n_beyond,
                         heads_beyond_unpaired=n_unpaired, exact_s=float(exact["seconds"].iloc[0])
                         if "seconds" in exact else float("nan")))
        print(f"{name}: {len(exact)} heads, baseline {base:.3f} (chance {1 / pairs:.3f}), "
              f"{n_beyond} heads beyond noise ({n_unpaired} by the unpaired rule)", flush=True)
        for est_name in args.estimators:
            t = time.perf_counter()
            order = estimator_order(model, enc, est_name)
            secs = time.perf_counter() - t
            for row in curves(exact, order, len(enc)):
                all_rows.append(dict(model=name, estimator=est_name, estimator_s=secs, **row))
            print(f"  {est_name}: {secs:.0f} s", flush=True)
        pd.DataFrame(all_rows).to_csv(args.out / "curves.csv", index=False, float_format="%.4g")
        pd.DataFrame(info).to_csv(args.out / "models.csv", index=False, float_format="%.4g")
    write_summary(pd.DataFrame(all_rows), pd.DataFrame(info), args.out, args.figure)


def _stats(g: pd.DataFrame) -> dict:
    """One estimator's curve on one model: the budget that reaches recall@10 >= 0.9 beyond noise, and
    the recalls at 15% of the heads ablated."""
    at = g[g.share <= TARGET_SHARE + 1e-9].iloc[-1] if (g.share <= TARGET_SHARE + 1e-9).any() else None
    hit = g[g["recall@10_noise"] >= TARGET_RECALL]
    need = "n/a" if g["recall@10_noise"].isna().all() else \
        (f"{int(hit.budget.iloc[0])} ({hit.share.iloc[0]:.0%})" if len(hit) else "never")
    r15 = "n/a" if at is None else f"{at['recall@10_noise']:.2f} ({int(at.budget)} heads)"
    rk = "n/a" if at is None else " / ".join(f"{at[f'recall@{k}']:.2f}" for k in KS)
    return dict(need=need, r15=r15, rk=rk, top10=int(g["n_top10_beyond_noise"].iloc[0]))


def write_summary(df: pd.DataFrame, info: pd.DataFrame, out: Path, figure: Path) -> None:
    """``summary.md`` (every model and estimator) and ``readme.md`` (the default estimator per model,
    the shorter table docs/fast-scan.md quotes), then the figure; models in the order of ``MODELS``."""
    order = {m: i for i, m in enumerate(MODELS)}
    df = df.sort_values("model", key=lambda s: s.map(order), kind="stable")
    info = info.set_index("model")
    lines = ["| model | heads | baseline (chance) | heads beyond noise (unpaired rule) | top-10 beyond noise | estimator | "
             "heads ablated for recall@10 >= 0.9 (beyond noise) | recall@10 beyond noise at 15% | "
             "recall@5 / @10 / @20 at 15% |", "|---|---|---|---|---|---|---|---|---|"]
    short = ["| model | heads | probe: pairs, prompts | baseline (chance) | heads beyond noise (unpaired rule) | "
             f"of the exact top-10 | heads ablated for recall@10 >= 0.9 beyond noise ({DEFAULT}) | "
             f"recall@10 beyond noise at 15% ({DEFAULT}) |", "|---|---|---|---|---|---|---|---|"]
    for (model, est), g in df.groupby(["model", "estimator"], sort=False):
        i, st = info.loc[model], _stats(g)
        lines.append(f"| {model} | {int(i.heads)} | {i.baseline:.3f} ({i.chance:.3f}) | {int(i.heads_beyond_noise)} "
                     f"({int(i.heads_beyond_unpaired)}) | "
                     f"{st['top10']} | {est} | {st['need']} | {st['r15']} | {st['rk']} |")
        if est == DEFAULT:
            short.append(f"| {model} | {int(i.heads)} | {int(i.pairs)}, {int(i.examples):,} | {i.baseline:.3f} "
                         f"({i.chance:.3f}) | {int(i.heads_beyond_noise)} ({int(i.heads_beyond_unpaired)}) | "
                         f"{st['top10']} | {st['need']} | {st['r15']} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "readme.md").write_text("\n".join(short) + "\n")
    print("\n".join(lines))
    plot(df, figure)


def plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(df.model))
    fig, axes = plt.subplots(1, len(models), figsize=(3.2 * len(models), 3.0), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models):
        for est, g in df[df.model == model].groupby("estimator", sort=False):
            y = g["recall@10_noise"] if not g["recall@10_noise"].isna().all() else g["recall@10"]
            ax.plot(g.share * 100, y, label=est)
        ax.axvline(TARGET_SHARE * 100, color="grey", ls=":")
        ax.axhline(TARGET_RECALL, color="grey", ls=":")
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("heads ablated (%)")
        ax.set_xlim(0, 60)
    axes[0][0].set_ylabel("recall@10 (beyond noise)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
