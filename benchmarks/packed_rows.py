"""The KV probe's rows packed (``scan.shared_prefix``) against a row per continuation, and bf16
against float32, on a real checkpoint on the CPU, in one run.

For each dtype, the exact head scan of every head of ``--layers`` on the first ``--examples`` prompts
of a probe file, packed and not, interleaved in one process at ``--threads`` torch threads: their
CPU seconds and ratio, whether every head's accuracy is the same, the largest answer log-prob
difference, and the tokens each way puts through the model. The ratio of the float32 to the bf16
packed scan is the bf16 rate of the plan's CPU rows (``Hardware.cpu_gflops_bf16``).

    python benchmarks/packed_rows.py --model results/models/smollm2-135m \\
        --probe results/probes/kv-paper-n10-s0-nosep.examples.jsonl --layers 26 27 28 29 --examples 3

Writes ``benchmarks/results/packed_rows.json`` (``--out``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a converted checkpoint directory")
    ap.add_argument("--probe", required=True, help="a KV probe's examples.jsonl")
    ap.add_argument("--layers", type=int, nargs="+", required=True, help="every head of these is ablated")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "packed_rows.json")
    args = ap.parse_args()

    import torch

    from gna.models import load_model
    from gna.models.spec import ModelSpec
    from gna.probes import encode, iter_batches
    from gna.probes.kv import read_jsonl
    from gna.scan.exact import scan_heads

    torch.set_num_threads(args.threads)
    examples = read_jsonl(args.probe)[:args.examples]
    out = dict(model=args.model, layers=args.layers, examples=len(examples), threads=args.threads, runs={})
    for dtype in args.dtypes:
        model, tok = load_model(ModelSpec(path=args.model, dtype=dtype))
        got = {}
        for packed in (True, False):
            enc = encode(examples, tok, packed=packed)
            tokens = sum(int(b.attention_mask.sum()) for b in iter_batches(enc, 8))
            t = time.process_time()
            ranking = scan_heads(model, enc, batch_size=8, layers=args.layers, progress=False)
            got[packed] = (time.process_time() - t, tokens, ranking.sort_values(["layer", "kind", "head"]))
        (ps, pt, pr), (rs, rt, rr) = got[True], got[False]
        run = dict(packed_s=ps, rows_s=rs, ratio=rs / ps, packed_tokens=pt, rows_tokens=rt,
                   same_accuracy=bool((pr.accuracy.values == rr.accuracy.values).all()),
                   max_logprob_diff=float(abs(pr.answer_logprob.values - rr.answer_logprob.values).max()))
        out["runs"][dtype] = run
        print(dtype, json.dumps(run), flush=True)
    if {"float32", "bfloat16"} <= set(out["runs"]):
        out["bf16_over_fp32_packed"] = out["runs"]["float32"]["packed_s"] / out["runs"]["bfloat16"]["packed_s"]
        print(f"bf16 packed scan {out['bf16_over_fp32_packed']:.2f}x float32's", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
