"""Table 1: minimal model; in the G&A layers keep only the Gather and/or Aggregate heads (or none).

Heads are the config's named ones (the paper's), the discovered ones: in each critical layer (one or
two), the head(s) whose removal alone costs MMLU most (rule critical_heads), or the KV scan's top
Gather and top Aggregate-pattern heads (head_keeping.scan_heads)."""

import json

import pandas as pd

from gna.experiments.head_selection import keeping_plan, keeping_roles, no_critical_note, unclassified
from gna.experiments.pruning import metric_by
from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
    depth, answers = json.load(open(i.minimal))["minimal_depth"], []
    critical = json.load(open(i.critical))
    layers = critical["table1_layers"]
    search = {}
    if i.heads and layers:   # the discovered heads' search (the input lists are empty for other sources)
        scores = pd.read_csv(i.heads[0])
        search = dict(scores=metric_by(scores, ["layer", "head"], p.tasks[:1]).rename("mmlu").reset_index(),
                      kind=str(scores.kind.dropna().iloc[0]))
    ga = pd.read_csv(i.ga[0]) if i.ga else None
    roles, note = keeping_roles(w.source, w.condition, depth, layers=layers, per_layer=p.per_layer, named=p.named,
                                ga=ga, none=no_critical_note(critical),
                                heads_by=p.get("heads_by", "role"), threshold=p.get("threshold"),
                                **search)
    if note:
        log.info("%s heads, %s: %s (minimal model of depth %d): nothing to evaluate", w.source, w.condition, note,
                 depth)
        heads = {role: " ".join(f"L{h[0]}H{h[1]}" for h in hs) for role, hs in (roles or {}).items()}
        rows = pd.DataFrame([{**p.fields, **heads, "kept": "nothing", "note": note}])
    else:
        too_deep = [h for hs in roles.values() for h in hs if int(h[0]) >= depth]
        if too_deep:
            raise ValueError(f"head_keeping: heads {too_deep} lie outside the minimal model (layers 0..{depth - 1})")
        keep, kept = keeping_plan(roles, w.condition)
        log.info("%s heads %s; kept %s", w.source, roles, kept)
        rows = evaluation_rows(p.spec, p.tasks, [{"truncate": depth}, *keep], p.eval, p.micro_data,
                               {**p.fields, "gather": " ".join(f"L{h[0]}H{h[1]}" for h in roles["gather"]),
                                "aggregate": " ".join(f"L{h[0]}H{h[1]}" for h in roles["aggregate"]),
                                "kept": " ".join(f"{k}:{v}" for k, v in kept.items()),
                                # a scan head picked by its pattern that the ranking left unclassified
                                "unclassified": " ".join(h for role, hs in roles.items()
                                                         for h in unclassified(ga if w.source == "scan" else None,
                                                                               hs, role))},
                               answers=answers)
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
