"""Table 1's head search: each head of the critical pair ablated alone in the minimal model, MMLU."""

import json

import pandas as pd

from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.models import describe, load_model
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    depth = json.load(open(snakemake.input.minimal))["minimal_depth"]
    pair = json.load(open(snakemake.input.critical))["pair"]
    frames, answers = [], []
    if not pair:
        log.info("fewer than two critical layers: no head to search")
        frames.append(pd.DataFrame([{**p.fields, "layer": pd.NA, "head": pd.NA, "note": "no critical layer pair"}]))
    else:
        model = load_model(p.spec)
        for layer in pair:
            mixers = describe(model[0]).mixers_in(layer)   # a hybrid layer: its attention heads
            mixer = next((m for m in mixers if m.kind == "attention"), mixers[0])
            for head in range(mixer.n_heads):
                rows = evaluation_rows(p.spec, p.tasks, [{"truncate": depth},
                                                         {"ablate_heads": [[layer, head, mixer.kind]]}],
                                       p.eval, p.micro_data, {**p.fields, "layer": layer, "head": head,
                                                              "kind": mixer.kind}, model=model, answers=answers)
                frames.append(rows)
                log.info("L%dH%d removed: %s", layer, head,
                         rows[rows.metric == "acc"][["task", "value"]].to_string(index=False, header=False))
    write_csv(pd.concat(frames, ignore_index=True), snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
