"""Table 1: minimal model; in the G&A layers keep only the Gather and/or Aggregate heads (or none).

Heads are the config's named ones (the paper's) or the discovered ones: in each of the two
critical layers, the head(s) whose removal alone costs MMLU most (rule critical_heads)."""

import json

import pandas as pd

from gna.experiments.head_selection import keeping_plan, mmlu_heads, named_role_heads
from gna.experiments.pruning import metric_by
from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    depth, answers = json.load(open(snakemake.input.minimal))["minimal_depth"], []
    pair = json.load(open(snakemake.input.critical))["pair"]
    if w.source == "named":
        roles = named_role_heads(p.named)
    elif pair:
        scores = pd.read_csv(snakemake.input.heads[0])  # the input is a list (empty for named heads)
        mmlu = metric_by(scores, ["layer", "head"], p.tasks[:1]).rename("mmlu").reset_index()
        kind = str(scores.kind.dropna().iloc[0])
        roles = {role: [[layer, h, kind] for h in mmlu_heads(mmlu, layer, p.per_layer)]
                 for role, layer in zip(("gather", "aggregate"), pair)}
    else:
        roles = None
    if roles is None:
        log.info("no pair of critical layers in the minimal model (depth %d): nothing to keep", depth)
        rows = pd.DataFrame([{**p.fields, "kept": "nothing (no pair)", "note": "no critical layer pair"}])
    else:
        too_deep = [h for hs in roles.values() for h in hs if int(h[0]) >= depth]
        if too_deep:
            raise ValueError(f"head_keeping: heads {too_deep} lie outside the minimal model (layers 0..{depth - 1})")
        keep, kept = keeping_plan(roles, w.condition)
        log.info("%s heads %s; kept %s", w.source, roles, kept)
        rows = evaluation_rows(p.spec, p.tasks, [{"truncate": depth}, *keep], p.eval, p.micro_data,
                               {**p.fields, "gather": " ".join(f"L{h[0]}H{h[1]}" for h in roles["gather"]),
                                "aggregate": " ".join(f"L{h[0]}H{h[1]}" for h in roles["aggregate"]),
                                "kept": " ".join(f"{k}:{v}" for k, v in kept.items())}, answers=answers)
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
