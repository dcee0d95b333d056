"""Attribution patching against exact single-head ablation: how good the estimate is, how much faster.

(a) On every shipped micro model (trained: their rankings mean something), on the micro study's
    scan probe (compact KV format, 8 pairs, 200 prompts, seed 0): the Spearman correlation over all
    heads of the estimate with the exact accuracy drop and with the exact log-prob drop; the recall of
    the exact top-5 / top-10 inside the estimate's top-N; whether atp+exact (defaults) gives the exact
    top-5 in the same order and the exact top-10; the false-negative guard's count.
(b) TIMING ONLY (random weights: it times the estimate, it cannot test it; the recall of the exact
    ranking is benchmarks/atp_recall.py's, at real width benchmarks/scan_real_width.py's).
    Wall time of the exact scan against atp+exact on a Llama-3.2-1B-like layout (16 layers x 32 heads,
    8 K/V heads, small width, random weights), then how it scales with the number of heads; the last
    line is ``speedup: <ratio>`` on that layout.

    python benchmarks/atp_validation.py [--examples 200] [--timing-examples 16] [--threads 1]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from gna.scan.attribution import atp_scan
from gna.scan.attribution_ranking import by_magnitude
from gna.micro.tokenizer import word_level_tokenizer
from gna.models import describe, load_model
from gna.models.tiny import build_tiny_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode
from gna.scan import scan, scan_heads

ROOT = Path(__file__).resolve().parents[1]
MICRO = {"micro-llama": {}, "micro-mamba2": {}, "micro-zamba2": {}, "micro-mamba1": {"adapter_options": {"channel_group": 8}}}
DEFAULTS = dict(candidates=16, guard_sample=8, guard_k=10, atp_score="margin")


def heads(df: pd.DataFrame) -> list[tuple]:
    return list(zip(df.layer, df["head"], df.kind))


def validate(name: str, spec: dict, args) -> dict:
    model, tok = load_model({"path": str(ROOT / "data" / "models" / name), **spec})
    probe = encode(generate_kv_probe(8, args.examples, seed=0, fmt="compact"), tok)
    exact = scan_heads(model, probe, progress=False)
    n = len(exact)
    row = dict(model=name, heads=n, baseline=round(float(exact.baseline_accuracy[0]), 3))
    for score, graddrop in (("margin", False), ("logprob", False), ("margin", True)):
        t0 = time.perf_counter()
        est = atp_scan(model, probe, describe(model).mixers, score=score, graddrop=graddrop, progress=False)
        t = time.perf_counter() - t0
        j = exact.merge(est, on=["layer", "head", "kind"])
        tag = score + ("+GD" if graddrop else "")
        # Spearman of the exact drops with the magnitude atp+exact ranks by, and with the signed mean
        row[f"rho_acc mag [{tag}]"] = round(j["drop"].corr(j.atp_magnitude, method="spearman"), 2)
        if not graddrop:
            row[f"rho_acc mean [{tag}]"] = round(j["drop"].corr(j.atp_drop, method="spearman"), 2)
            row[f"rho_lp mean [{tag}]"] = round(j["logprob_drop"].corr(j.atp_drop, method="spearman"), 2)
        orders = {"": heads(by_magnitude(j))}
        if tag == "margin":  # the dropped alternative: |mean estimate| instead of the per-example magnitude
            orders[" |mean|"] = heads(j.assign(m=j.atp_drop.abs()).sort_values("m", ascending=False))
        for label, order in orders.items():
            for k in (5, 10):
                top = set(heads(exact.head(k)))
                for N in (5, 10, 16, 20):
                    if k <= N < n and (not label or k == 5):
                        row[f"R{k}@{N}{label} [{tag}]"] = round(len(top & set(order[:N])) / k, 2)
        row[f"t_atp s [{tag}]"] = round(t, 2)
    both, guard = scan(model, probe, method="atp+exact", progress=False, **DEFAULTS)
    row["top5_same_order"] = heads(both.head(5)) == heads(exact.head(5))
    row["top10_same"] = heads(both.head(10)) == heads(exact.head(10))
    row["guard_hits"] = f"{guard.sample_beats_kth}/{guard.sampled}"
    missing = [h for h in heads(exact.head(5)) if h not in heads(both.head(5))]
    if missing:
        row["top5_missed"] = " ".join(f"L{l}H{h}{k[0]}" for l, h, k in missing)
    return row


def timed(fn):
    """``(result, wall seconds, CPU seconds of this process)``: the machine is shared, so both."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def timing(layers: int, n_heads: int, kv: int, hidden: int, probe, vocab: int, args) -> tuple:
    model = build_tiny_model("llama", vocab_size=vocab, hidden=hidden, layers=layers, heads=n_heads,
                             num_key_value_heads=kv, head_dim=hidden // n_heads, intermediate_size=2 * hidden)
    exact, t_exact, c_exact = timed(lambda: scan_heads(model, probe, batch_size=args.batch_size, progress=False))
    (both, _), t_both, c_both = timed(lambda: scan(model, probe, method="atp+exact", batch_size=args.batch_size,
                                           progress=False, **DEFAULTS))
    verified = both[both.exact].merge(exact, on=["layer", "head", "kind"], suffixes=("", "_x"))
    if not (verified.accuracy == verified.accuracy_x).all():
        raise SystemExit("atp+exact's verified rows differ from the exact scan's")
    return t_exact, t_both, c_exact, c_both, len(exact)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", type=int, default=200, help="prompts of the micro models' probe")
    ap.add_argument("--timing-examples", type=int, default=16, help="prompts of the timing probe")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256, help="width of the timing models (at 128, per-call "
                    "overheads, not FLOPs, dominate a forward)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-micro", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pd.set_option("display.width", 250, "display.max_columns", 100)
    print(f"atp+exact defaults: {DEFAULTS}; torch threads {args.threads}")
    if not args.skip_micro:
        rows = [validate(name, spec, args) for name, spec in MICRO.items()]
        df = pd.DataFrame(rows).set_index("model").T
        print(f"(a) micro models, KV probe {args.examples} prompts x 8 pairs (compact); rho = Spearman over all "
              f"heads; Rk@N = share of the exact top-k among the N heads of largest atp_magnitude")
        print(df.to_string())
    keys = [f"k{i}" for i in range(300)]
    tok = word_level_tokenizer([str(i) for i in range(100)] + keys + ["?"])
    probe = encode(generate_kv_probe(10, args.timing_examples, seed=0, fmt="compact", key_pool=keys), tok)
    print(f"(b) wall time, random-weight Llama layouts (hidden {args.hidden}, GQA), "
          f"{args.timing_examples} prompts x 10 pairs")
    ratio = None
    for layers, n_heads, kv in ((4, 32, 8), (8, 32, 8), (16, 32, 8))[:0 if args.skip_timing else 3]:
        t_exact, t_both, c_exact, c_both, n = timing(layers, n_heads, kv, args.hidden, probe, len(tok), args)
        print(f"  {layers:2d} layers x {n_heads} heads ({kv} K/V): {n:4d} heads | wall: exact {t_exact:7.2f} s, "
              f"atp+exact {t_both:6.2f} s, {t_exact / t_both:5.1f}x | CPU: exact {c_exact:7.2f} s, "
              f"atp+exact {c_both:6.2f} s, {c_exact / c_both:5.1f}x")
        ratio = t_exact / t_both
    if ratio is not None:
        print(f"speedup: {ratio:.1f}")


if __name__ == "__main__":
    main()
