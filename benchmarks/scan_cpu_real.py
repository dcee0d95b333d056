"""The exact head scan on a real checkpoint on the CPU: against the naive loop, against the machine's
matmul floor, and before / after a change, in one run.

Three measurements on one model and one paper-format KV probe, each at ``--threads`` torch threads:

- **naive / exact**: ``gna.scan.naive_scan_heads`` (the whole model once per head, per prompt and per
  answer choice, like the paper's code) against ``gna.scan.scan_heads`` on the same heads and prompts
  (``--naive-examples`` prompts, ``--naive-heads`` heads of each of ``--naive-layers``); both must give the
  same accuracy for every head and log-probs within 1e-5 nats (the batched and unbatched sums of one
  fp32 computation differ in the last bits), else the run stops.
- **achieved rate / matmul floor**: the exact scan of every head of ``--layers`` on ``--examples``
  prompts, its FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode`` while it runs (matrix
  products and the attention kernels it knows, 2 per multiply-add; elementwise work is not counted),
  divided by its CPU seconds, against a plain float32 ``torch.mm`` of the scan's own shapes (its rows
  x tokens by hidden, by the MLP's width) at the same thread count, measured right before and right
  after the scan in the same process. The rate per CPU second is what a loaded, shared machine keeps
  steady; wall seconds are printed beside it.
- **before / after**: the same exact scan in fresh subprocesses, alternating between the source tree
  at ``--before`` (``git archive``) and the working tree, ``--repeats`` times: the ratio of their CPU
  seconds, and whether their rankings agree.

    python benchmarks/scan_cpu_real.py --model /work/models/smollm2-135m-instruct --layers 28 29 \\
        --naive-layers 0 15 29 --naive-examples 2 --examples 16 --pairs 8 --threads 1 --before 1eca824 --repeats 2

Writes ``benchmarks/results/scan_cpu_real.json`` (``--out``); the last line is ``naive/exact: <ratio>``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from scan_real_width import export, run  # noqa: E402  the same before/after machinery

CHILD = r"""
import json, sys, time
import torch
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
from gna.models import load_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, iter_batches, score
from gna.scan import naive_scan_heads, scan_heads

def clock(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c

def floor(rows, hidden, width):
    # plain float32 matmul of the scan's shapes, >= 2 CPU seconds
    x, w = torch.randn(rows, hidden), torch.randn(hidden, width)
    torch.mm(x, w)
    n, (_, wall, cpu) = 0, (None, 0.0, 0.0)
    while cpu < 2.0:
        _, dw, dc = clock(lambda: torch.mm(x, w))
        n, wall, cpu = n + 1, wall + dw, cpu + dc
    return dict(gflops_cpu=2 * rows * hidden * width * n / cpu / 1e9, gflops_wall=2 * rows * hidden * width * n / wall / 1e9)

model, tok = load_model({"path": args["model"], "device": "cpu"})
cfg = model.config
out = dict(threads=torch.get_num_threads())
enc = encode(generate_kv_probe(args["pairs"], args["examples"], 0, fmt="paper"), tok)
batches = list(iter_batches(enc, args["batch_size"]))
B = max(b.input_ids.shape[0] for b in batches)
T = max(b.input_ids.shape[1] for b in batches)
copies = max(1, args["max_rows"] // B)
out.update(rows_per_batch=B, tokens=T, examples=len(enc), choices=enc.n_choices, one_row=enc.one_row,
           rows=sum(b.input_ids.shape[0] for b in batches))
base = score(model, enc, batch_size=args["batch_size"])
out["baseline_accuracy"] = base.accuracy
heads = [(l, h, "attention") for l in args["layers"] for h in range(cfg.num_attention_heads)]
out["floor_before"] = floor(copies * B * T, cfg.hidden_size, cfg.intermediate_size)
from torch.utils.flop_counter import FlopCounterMode
counter = FlopCounterMode(display=False)
with counter:
    ranking, wall, cpu = clock(lambda: scan_heads(model, enc, batch_size=args["batch_size"], max_rows=args["max_rows"],
                                                 heads=heads, baseline=base, progress=False))
out["floor_after"] = floor(copies * B * T, cfg.hidden_size, cfg.intermediate_size)
out.update(exact_wall_s=wall, exact_cpu_s=cpu, exact_heads=len(heads), exact_flops=counter.get_total_flops())
out["ranking"] = ranking[["layer", "head", "accuracy", "answer_logprob"]].values.tolist()
if args["naive"]:
    small = encode(generate_kv_probe(args["pairs"], args["naive_examples"], 0, fmt="paper"), tok)
    few = [(l, h, "attention") for l in args["naive_layers"] for h in range(args["naive_heads"])]
    fast, fw, fc = clock(lambda: scan_heads(model, small, batch_size=args["batch_size"], max_rows=args["max_rows"],
                                            heads=few, progress=False))
    slow, sw, sc = clock(lambda: naive_scan_heads(model, small, heads=few))
    j = fast.merge(slow, on=["layer", "kind", "head"], suffixes=("", "_naive"))
    out.update(naive_heads=len(few), naive_examples=len(small), naive_wall_s=sw, naive_cpu_s=sc,
               exact_small_wall_s=fw, exact_small_cpu_s=fc, same_accuracy=bool((j.accuracy == j.accuracy_naive).all()),
               max_logprob_diff=float((j.answer_logprob - j.answer_logprob_naive).abs().max()),
               same_rank=bool((j["rank"] == j["rank_naive"]).all()))
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="/work/models/smollm2-135m-instruct", help="a converted checkpoint directory")
    ap.add_argument("--layers", type=int, nargs="+", default=[28, 29], help="every head of these: the rate, before/after")
    ap.add_argument("--naive-layers", type=int, nargs="+", default=[0, 15, 29])
    ap.add_argument("--examples", type=int, default=16)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-rows", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--naive-examples", type=int, default=4)
    ap.add_argument("--naive-heads", type=int, default=2, help="heads of each of --naive-layers both scans ablate")
    ap.add_argument("--before", default=None, help="a git revision to time against (default: none)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scan_cpu_real.json")
    a = ap.parse_args()
    spec = dict(model=a.model, layers=a.layers, examples=a.examples, pairs=a.pairs, batch_size=a.batch_size,
                max_rows=a.max_rows, threads=a.threads, naive_examples=a.naive_examples, naive_heads=a.naive_heads,
                naive_layers=a.naive_layers)
    runs = {"after": [], "before": []}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": ROOT / "workflow"}
        if a.before:
            trees["before"] = export(a.before, Path(tmp))
        for i in range(a.repeats):
            for which in ("before", "after") if a.before else ("after",):   # alternating: the same load for both
                got = run(trees[which], {**spec, "naive": which == "after" and i == 0}, CHILD, a.threads)
                runs[which].append(got)
                print(which, json.dumps({k: v for k, v in got.items() if k != "ranking"}), flush=True)
    after = runs["after"]
    first = after[0]
    rate = [r["exact_flops"] / r["exact_cpu_s"] / 1e9 for r in after]
    floors = [r[k]["gflops_cpu"] for r in after for k in ("floor_before", "floor_after")]
    summary = dict(model=a.model, spec=spec, load=os.getloadavg(),
                   naive_over_exact_cpu=first["naive_cpu_s"] / first["exact_small_cpu_s"],
                   naive_over_exact_wall=first["naive_wall_s"] / first["exact_small_wall_s"],
                   exact_gflops_cpu=rate, matmul_floor_gflops_cpu=floors,
                   rate_over_floor=[r / (0.5 * (x["floor_before"]["gflops_cpu"] + x["floor_after"]["gflops_cpu"]))
                                    for r, x in zip(rate, after)])
    if a.before:
        summary["before_over_after_cpu"] = [b["exact_cpu_s"] / f["exact_cpu_s"] for b, f in zip(runs["before"], after)]
        summary["before_flops_over_after"] = runs["before"][0]["exact_flops"] / first["exact_flops"]
        summary["same_ranking_before_after"] = all(
            [x[:3] for x in b["ranking"]] == [x[:3] for x in f["ranking"]] for b, f in zip(runs["before"], after))
        summary["max_logprob_diff_before_after"] = max(
            abs(x[3] - y[3]) for b, f in zip(runs["before"], after) for x, y in zip(b["ranking"], f["ranking"]))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(dict(summary=summary, runs=runs), indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    if not (first["same_accuracy"] and first["max_logprob_diff"] <= 1e-5):
        raise SystemExit("the exact scan and the naive loop disagree")
    print(f"naive/exact: {summary['naive_over_exact_cpu']:.1f}")


if __name__ == "__main__":
    main()
