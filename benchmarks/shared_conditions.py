"""CPU seconds of a model's conditions evaluated each on its own (before) and together, the unchanged
layers run once (after: gna.evaluation.prefix_conditions), on one thread, in one run; the rows of
both must be identical (the same chosen answers, so the same accuracies, byte for byte once written).

Experiments: ``gradual`` (Fig. 2: every depth 1..n), ``individual`` (Fig. 3: each layer of the
minimal model removed, ``--minimal`` its depth), ``heads`` (Table 1's head search: each head of
``--head-layer`` ablated in the minimal model).

    python benchmarks/shared_conditions.py --model PATH [--dtype bfloat16] [--mmlu N] \
        [--experiments gradual individual heads] [--minimal D] [--head-layer L] [--out DIR]

``--mmlu N``: the local MMLU sample of N questions (the pinned MMLU artifact; the real preset's
task, ``mmlu_local``, with ``--cloze`` its knowledge task too); without it, the micro study's tasks
(a micro model). ``--every n``: every n-th depth or removal only. Writes ``<out>/times.csv``
and prints the ratios. The acceptance run (hours on one core):

    python benchmarks/shared_conditions.py --model results/models/qwen2.5-coder-1.5b --dtype bfloat16 \
        --mmlu 91 --cloze --shared-prefix --batch-size 4 --minimal 24 --head-layer 22
"""
from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import pandas as pd
import torch
import yaml

from gna.config.schema import with_defaults
from gna.experiments.run import condition_rows, evaluation_rows
from gna.models import describe, load_model

ROOT = Path(__file__).resolve().parents[1]


def conditions_of(experiment: str, model, minimal: int, head_layer: int) -> list[list[dict]]:
    n = describe(model).n_layers
    if experiment == "gradual":
        return [[{"truncate": d}] for d in range(1, n + 1)]
    if experiment == "individual":
        return [[{"truncate": minimal}, {"drop_layer": i}] for i in range(minimal)]
    mixers = describe(model).mixers_in(head_layer)
    mixer = next((m for m in mixers if m.kind == "attention"), mixers[0])
    return [[{"truncate": minimal}, {"ablate_heads": [[head_layer, h, mixer.kind]]}] for h in range(mixer.n_heads)]


def differing_answers(before: list[pd.DataFrame], after: list[pd.DataFrame]) -> int:
    """Questions whose chosen answer differs between the two sides, over every condition."""
    keys = ["task", "filter", "metric", "doc_id"]
    n = 0
    for b, a in zip(before, after):
        both = b.merge(a, on=keys, suffixes=("_b", "_a"))
        if len(both) != len(b) or len(both) != len(a):
            raise SystemExit("the two sides scored different questions")
        n += int((both["chosen_b"].astype(str) != both["chosen_a"].astype(str)).sum())
    return n


def csv_bytes(rows: pd.DataFrame) -> bytes:
    buf = io.StringIO()
    rows.to_csv(buf, index=False)
    return buf.getvalue().encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--mmlu", type=int, default=None, help="questions of the local MMLU sample (>= 91)")
    ap.add_argument("--cloze", action="store_true", help="also the cloze MMLU task (the real preset's knowledge)")
    ap.add_argument("--experiments", nargs="+", default=["gradual", "individual", "heads"],
                    choices=["gradual", "individual", "heads"])
    ap.add_argument("--minimal", type=int, default=None, help="the minimal model's depth (default: all layers)")
    ap.add_argument("--head-layer", type=int, default=None, help="the layer whose heads are searched")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--shared-prefix", action="store_true", help="eval.shared_prefix (the real preset's)")
    ap.add_argument("--every", type=int, default=1, help="every n-th depth or removal only (a quicker measure)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/shared_conditions"))
    args = ap.parse_args()
    torch.set_num_threads(1)

    cfg = with_defaults(yaml.safe_load((ROOT / "config.yaml").read_text()))
    eval_cfg = {**cfg["eval"], "chat_tasks": [], "batch_size": args.batch_size, "shared_prefix": args.shared_prefix}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.mmlu:
        from gna.evaluation.local_mmlu import build
        from gna.external import artifact_file

        build(ROOT / artifact_file("mmlu"), out / "mmlu", size=args.mmlu, seed=0)
        tasks = ["mmlu_local"] + (["mmlu_local_cloze"] if args.cloze else [])
        micro_data, eval_cfg["local_mmlu_dir"] = None, str(out / "mmlu")
        eval_cfg["max_length"] = None
    else:
        tasks, micro_data = [cfg["tasks"]["mmlu"], *cfg["tasks"]["knowledge"]], str(ROOT / cfg["tasks"]["micro_data"])
    spec = {"path": args.model, "dtype": args.dtype, "device": "cpu"}
    model = load_model(spec)
    n = describe(model[0]).n_layers
    minimal = args.minimal or n
    head_layer = args.head_layer if args.head_layer is not None else minimal - 1

    times = []
    for experiment in args.experiments:
        conditions = conditions_of(experiment, model[0], minimal, head_layer)
        if experiment != "heads":
            conditions = conditions[args.every - 1::args.every]
        fields = [{"condition": i} for i in range(len(conditions))]
        answers_before, answers_after = [], []
        start = time.process_time()
        before = [evaluation_rows(spec, tasks, c, eval_cfg, micro_data, f, model=model, answers=answers_before)
                  for c, f in zip(conditions, fields)]
        t_before = time.process_time() - start
        start = time.process_time()
        after = condition_rows(spec, tasks, conditions, eval_cfg, micro_data, fields, model=model,
                               answers=answers_after)
        t_after = time.process_time() - start
        same = all(csv_bytes(a) == csv_bytes(b) for a, b in zip(after, before))
        # both sides kept, so that a difference can be read question by question
        for side, rows, answers in (("before", before, answers_before), ("after", after, answers_after)):
            pd.concat(rows, ignore_index=True).to_csv(out / f"{experiment}.{side}.csv", index=False)
            pd.concat(answers, ignore_index=True).to_csv(out / f"{experiment}.{side}.answers.csv", index=False)
        differ = differing_answers(answers_before, answers_after)
        times.append({"experiment": experiment, "conditions": len(conditions), "cpu_s_before": round(t_before, 1),
                      "cpu_s_after": round(t_after, 1), "ratio": round(t_before / t_after, 2),
                      "identical_rows": same, "answers": sum(len(a) for a in answers_before),
                      "differing_answers": differ})
        print(times[-1], flush=True)
    table = pd.DataFrame(times)
    table.to_csv(out / "times.csv", index=False)
    print(table.to_string(index=False))
    if not table.identical_rows.all():
        raise SystemExit("the shared evaluation's rows differ from the conditions' own (see <out>/<experiment>.*.csv)")


if __name__ == "__main__":
    main()
