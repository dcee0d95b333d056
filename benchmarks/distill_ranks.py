"""Seconds per optimizer step of a distillation stage on 1 and on 2 gloo ranks on the CPU (one thread
each), started with torchrun as a stage job starts them (gna.hybrid.stage_launch). The same
effective batch either way: 2 ranks each go through half of it.

    python benchmarks/distill_ranks.py [--stage 3] [--steps 6] [--batch 8] [--seq 128]

The first step (warm-up) is left out. On a machine with fewer free cores than ranks the 2-rank
time shows the communication and duplication overhead rather than a speed-up.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rank(args) -> None:
    import torch

    from gna.hybrid.distillation import distill
    from gna.hybrid.student import build_student
    from gna.hybrid.distributed import process_group
    from gna.models.tiny import build_tiny_model

    torch.set_num_threads(1)
    with process_group() as world:
        torch.manual_seed(0)
        teacher = build_tiny_model("llama", hidden_size=256, intermediate_size=512, num_attention_heads=8,
                                   num_key_value_heads=4, vocab_size=2048, num_hidden_layers=4).eval()
        student = build_student(teacher, [(1, 2)] if args.stage > 1 else [], 16, chunk_size=32, seed=1)
        g = torch.Generator().manual_seed(0)
        batches = [torch.randint(3, 2048, (args.batch, args.seq), generator=g) for _ in range(args.steps)]
        stamps = []

        def data(step):
            stamps.append(time.perf_counter())
            return batches[step]

        with tempfile.TemporaryDirectory() as tmp:
            distill(teacher, student, args.stage, data, args.steps, 1e-3, tmp, save_every=10**6, micro_batch_size=2,
                    vocab_chunk=256 if args.stage == 3 else None)
        per_step = (stamps[-1] - stamps[1]) / (len(stamps) - 2)  # steps 1 .. n-2 (the last one's end is not stamped)
        if world.main:
            print(json.dumps({"ranks": world.size, "stage": args.stage, "seconds_per_step": per_step}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stage", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank:
        return rank(args)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT / 'workflow'}{os.pathsep}"
           f"{os.environ.get('PYTHONPATH', '')}"}
    for n in (1, 2):
        out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                              __file__, "--rank", *sys.argv[1:]], capture_output=True, text=True, env=env, check=True)
        print(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
