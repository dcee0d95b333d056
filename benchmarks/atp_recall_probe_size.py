"""The fast scan's recall per probe size: ``atp+exact``'s recall of the exact top heads, and the heads
it must ablate for it, on KV probes of several sizes (pairs x prompts) on the validation models.

For each probe (compact format, probe seed 0, as ``benchmarks/atp_recall.py``): the exact scan (every
head ablated alone, with each head's ``discordant`` prompts) and the default estimator's order
(``atp``, margin score). Two references for "the exact top-10 beyond noise" (exact one-sided McNemar,
5% familywise over the model's heads: :func:`atp_recall.beyond_noise`):

- ``own``: the same probe's exact scan (what a user's run can know: on a small probe few heads clear
  the noise bar, so recall against them is easy and says little);
- ``reference``: the largest probe of the same pairs in the grid (the heads a small probe should find).

Per probe: heads beyond noise, the top-10 beyond noise, the heads ``atp`` must ablate for recall@10 >=
0.9 beyond noise against each reference, and the recall at the default ``--candidates 16`` + guard
sample (24 heads), and ``resolved_share``: of the reference's top-10 beyond noise, the share this
probe's own exact scan finds beyond noise (a small probe's top-10 is mostly within noise, whatever the
estimator's order). Writes ``benchmarks/results/atp_recall/probe_sizes.csv`` and ``probe_sizes.md``;
:mod:`gna.scan.probe_size` holds its ``resolved_share`` for ``gna scan``'s start-of-run warning.

    python benchmarks/atp_recall_probe_size.py [--models val-llama val-bamba] [--grid 8x64 8x256 ...]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atp_recall import KEY, TARGET_RECALL, beyond_noise, estimator_order, exact_ranking  # noqa: E402

from gna.micro.validation_models import VALIDATION_MODELS  # noqa: E402
from gna.models import load_model  # noqa: E402
from gna.probes.kv import generate_kv_probe  # noqa: E402
from gna.probes.scoring import encode  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "atp_recall"
DEFAULT_BUDGET = 16 + 8   # gna scan --method atp+exact's defaults: --candidates 16, --guard-sample 8


def _top10_beyond(exact: pd.DataFrame) -> list[tuple]:
    ex = exact.sort_values("rank").reset_index(drop=True)
    b = beyond_noise(ex)
    return [tuple(r) for r, ok in zip(ex[KEY].head(10).itertuples(index=False), b.head(10)) if ok]


def _recall(order: list[tuple], targets: list[tuple], m: int) -> float:
    return sum(h in set(order[:m]) for h in targets) / len(targets) if targets else float("nan")


def _needed(order: list[tuple], targets: list[tuple]) -> int | None:
    """The fewest heads ablated, in the estimator's order, for recall >= TARGET_RECALL of ``targets``."""
    if not targets:
        return None
    pos = sorted(order.index(h) + 1 for h in targets)
    return pos[math.ceil(TARGET_RECALL * len(targets) - 1e-9) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["val-llama", "val-bamba"])
    ap.add_argument("--grid", nargs="+", default=["8x64", "8x256", "8x1000", "own x64", "own x256", "own x2000"],
                    help="PAIRSxPROMPTS; 'own' is the model's benchmark pairs (24 / 16)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tables-only", action="store_true", help="rewrite the tables from probe_sizes.csv; no model runs")
    args = ap.parse_args()
    if args.tables_only:
        write_tables(pd.read_csv(OUT / "probe_sizes.csv"))
        return
    torch.set_num_threads(args.threads)
    grid = [g.replace(" ", "") for g in args.grid]
    rows = []
    for name in args.models:
        own = VALIDATION_MODELS[name]["probe_pairs"]
        model, tok = load_model({"path": str(ROOT / "data" / "models" / name)})
        cells = []
        for g in grid:
            p, n = g.split("x")
            pairs, n = (own if p == "own" else int(p)), int(n)
            enc = encode(generate_kv_probe(pairs, n, 0, separator=" ", fmt="compact"), tok)
            # the benchmark's own probe (own pairs, 2000 prompts) reuses its cached exact ranking
            cache = OUT if (pairs == own and n == VALIDATION_MODELS[name].get("probe_examples")) else \
                OUT / "probe_sizes" / f"p{pairs}_n{n}"
            t = time.perf_counter()
            exact = exact_ranking(name, model, enc, pairs, cache)
            order = estimator_order(model, enc, "atp")
            print(f"{name} {pairs} pairs x {n} prompts: {time.perf_counter() - t:.0f} s", flush=True)
            cells.append((pairs, n, exact, order))
        for pairs, n, exact, order in cells:
            ref = max((c for c in cells if c[0] == pairs), key=lambda c: c[1])
            row = dict(model=name, heads=len(exact), pairs=pairs, prompts=n,
                       baseline=float(exact.baseline_accuracy.iloc[0]), chance=1 / pairs,
                       heads_beyond_noise=int(beyond_noise(exact).sum()), reference_prompts=ref[1])
            for label, targets in (("own", _top10_beyond(exact)), ("reference", _top10_beyond(ref[2]))):
                need = _needed(order, targets)
                row[f"top10_beyond_noise_{label}"] = len(targets)
                row[f"ablated_for_recall_{label}"] = need
                row[f"recall_at_default_{label}"] = _recall(order, targets, DEFAULT_BUDGET)
            rows.append(row)
    write_tables(pd.DataFrame(rows))


def write_tables(df: pd.DataFrame) -> None:
    """``probe_sizes.csv`` (with ``resolved_share``: of the reference's top-10 beyond noise, the share this
    probe's own top-10 beyond noise counts) and ``probe_sizes.md``."""
    df = df.assign(resolved_share=df.top10_beyond_noise_own / df.top10_beyond_noise_reference)
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / "probe_sizes.csv", index=False, float_format="%.4g")
    lines = [f"| model | pairs x prompts | baseline (chance) | heads beyond noise | exact top-10 beyond noise: this "
             f"probe / the reference probe | heads `atp` ablates for recall@10 >= {TARGET_RECALL} beyond noise: of "
             f"this probe's / of the reference's | recall at {DEFAULT_BUDGET} heads ablated (gna scan's defaults): "
             "this probe's / the reference's |", "|---|---|---|---|---|---|---|"]

    def need(v, heads):
        return "n/a" if pd.isna(v) else f"{int(v)} ({v / heads:.0%})"

    for r in df.itertuples():
        lines.append(f"| {r.model} | {r.pairs} x {r.prompts:,} | {r.baseline:.3f} ({r.chance:.3f}) | "
                     f"{r.heads_beyond_noise} | {r.top10_beyond_noise_own} / {r.top10_beyond_noise_reference} "
                     f"({r.reference_prompts:,} prompts) | {need(r.ablated_for_recall_own, r.heads)} / "
                     f"{need(r.ablated_for_recall_reference, r.heads)} | {r.recall_at_default_own:.2f} / "
                     f"{r.recall_at_default_reference:.2f} |")
    (OUT / "probe_sizes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
