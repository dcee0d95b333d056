"""The exact scan and ``atp+exact`` at the paper's real width, before and after a change, in one run.

Builds slices of the paper's transformers (Llama-3.2-3B, Llama-3.1-8B: their shipped config.json at
full width, heads and 128k vocabulary, 1 or 2 decoder layers, random weights, bf16 on the CPU) and
runs the scan on a KV-probe-shaped set (prompts of ~140 tokens as a 20-pair paper-format prompt, 20
one-token choices, lengths spread so a batch's rows end at different positions, as real prompts do).
Random weights: this times the computation and measures memory; it says nothing about rankings.

Each measurement is a fresh subprocess (its peak RSS is the job's), alternating between the two
source trees ``--before`` (a git revision, exported with ``git archive``) and the working tree, so
both see the same machine load; the ratio is before / after, per shape and method.

    python benchmarks/scan_real_width.py [--before f153210] [--shapes llama-3b llama-8b] [--layers 1]
        [--examples 8] [--heads 6] [--repeats 1]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
from transformers import LlamaConfig, LlamaForCausalLM
from gna.probes.encoded import EncodedProbe
from gna.scan import scan_heads
args = json.loads(sys.argv[1])
cfg = json.load(open(args["config"]))
cfg["num_hidden_layers"] = args["layers"]
torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.items() if k != "architectures"})).to(torch.bfloat16).eval()
from gna.models.adapters import attach_adapter
attach_adapter(model, None)
g = torch.Generator().manual_seed(0)
n, C, V = args["examples"], 20, cfg["vocab_size"]
prompts = [torch.randint(1000, V, (args["tokens"] - 6 + 2 * i,), generator=g).tolist() for i in range(n)]
choices = [[[1000 + c] for c in range(C)] for _ in range(n)]
enc = EncodedProbe(ids=[str(i) for i in range(n)], prompt_ids=prompts, choice_ids=choices,
                   answers=torch.randint(0, C, (n,), generator=g), n_choices=C, pad_id=0, single_token=True, one_row=True)
heads = [(0, h, "attention") for h in range(args["heads"])]
from gna.probes.scoring import score
t = time.perf_counter()
score(model, enc, batch_size=n)   # one forward per prompt: the unit of AtP's forward multiple
forward = time.perf_counter() - t
t = time.perf_counter()
if args["method"] == "exact":
    scan_heads(model, enc, batch_size=n, max_rows=256, heads=heads, progress=False)
else:
    from gna.scan.attribution import atp_scan
    from gna.scan import select_mixers
    atp_scan(model, enc, select_mixers(model, layers=[0]), batch_size=n, progress=False)
secs = time.perf_counter() - t
print(json.dumps(dict(seconds=secs, forward_s=forward, peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)))
"""


def export(rev: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "workflow/gna"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "workflow"


def run(tree: Path, args: dict, child: str = CHILD, threads: int = 1) -> dict:
    """``child`` in a fresh interpreter importing gna from ``tree``, ``args`` as JSON; its last line, parsed."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", child, json.dumps(args)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="f153210")
    ap.add_argument("--shapes", nargs="+", default=["llama-3b", "llama-8b"])
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--examples", type=int, default=8)
    ap.add_argument("--heads", type=int, default=6, help="heads of layer 0 the exact scan ablates")
    ap.add_argument("--tokens", type=int, default=140)
    ap.add_argument("--methods", nargs="+", default=["exact", "atp"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scan_real_width.json")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": export(a.before, Path(tmp)), "after": ROOT / "workflow"}
        for shape in a.shapes:
            for method in a.methods:
                spec = dict(config=str(ROOT / "data/architectures" / shape / "config.json"), layers=a.layers,
                            examples=a.examples, heads=a.heads, tokens=a.tokens, method=method)
                got = {"before": [], "after": []}
                for _ in range(a.repeats):
                    for which in ("before", "after"):   # alternating: the same load for both
                        got[which].append(run(trees[which], spec))
                        print(shape, method, which, got[which][-1], flush=True)
                best = {k: min(v, key=lambda r: r["seconds"]) for k, v in got.items()}
                rows.append(dict(shape=shape, method=method, layers=a.layers, examples=a.examples,
                                 heads=a.heads if method == "exact" else None, tokens=a.tokens,
                                 before_s=best["before"]["seconds"], after_s=best["after"]["seconds"],
                                 speed_ratio=best["before"]["seconds"] / best["after"]["seconds"],
                                 after_in_forwards=best["after"]["seconds"] / best["after"]["forward_s"],
                                 before_peak_rss_gb=best["before"]["peak_rss_gb"],
                                 after_peak_rss_gb=best["after"]["peak_rss_gb"]))
                print(json.dumps(rows[-1]), flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(dict(before=a.before, load=os.getloadavg(), rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
