"""Head-scan speed: the paper's naive loop against ``gna.scan.scan_heads`` on the same probe set.

Naive (the official code's shape): for every head, ablate it and run the whole model once per
answer choice of every example. Ours: residual stream cached below each layer, all of a
layer's ablations in one batch through the layers above, every choice read off one forward.
Checks that both give the same accuracy for every head and the same ranking, then prints
heads per second for both and, as the last line, ``speedup: <ratio>`` for the mid-size model.

    python benchmarks/scan_speed.py [--examples 20] [--pairs 10] [--threads 1]
"""
from __future__ import annotations

import argparse
import time

import torch

from gna.micro.tokenizer import word_level_tokenizer
from gna.models.tiny import build_tiny_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode
from gna.scan import naive_scan_heads, scan_heads

MODELS = {  # name -> (family, config)
    "tiny llama (2 layers, hidden 32, 4 heads)": ("llama", dict(hidden=32, layers=2, heads=4)),
    "mid-size llama (8 layers, hidden 512, 8 heads)": ("llama", dict(hidden=512, layers=8, heads=8)),
}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    keys = [f"k{i}" for i in range(300)]
    tok = word_level_tokenizer([str(i) for i in range(100)] + keys + ["?"])
    probe = encode(generate_kv_probe(args.pairs, args.examples, seed=0, fmt="compact", key_pool=keys), tok)
    print(f"probe: {args.examples} examples x {args.pairs} choices (compact KV format), torch threads {args.threads}")
    ratio = None
    for name, (family, cfg) in MODELS.items():
        model = build_tiny_model(family, vocab_size=len(tok), **cfg)
        fast, t_fast = timed(lambda: scan_heads(model, probe, batch_size=args.batch_size, progress=False))
        slow, t_slow = timed(lambda: naive_scan_heads(model, probe))
        j = fast.merge(slow, on=["layer", "kind", "head"], suffixes=("", "_naive"))
        same_acc = bool((j.accuracy == j.accuracy_naive).all())
        same_rank = bool((j["rank"] == j["rank_naive"]).all())
        n = len(fast)
        print(f"{name}: {n} heads | naive {t_slow:.2f} s ({n / t_slow:.2f} heads/s) | "
              f"ours {t_fast:.2f} s ({n / t_fast:.2f} heads/s) | same accuracies: {same_acc} | "
              f"same ranking: {same_rank}")
        if not (same_acc and same_rank):
            raise SystemExit("the two scans disagree")
        ratio = t_slow / t_fast
    print(f"speedup: {ratio:.1f}")


if __name__ == "__main__":
    main()
