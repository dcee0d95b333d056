"""Table 1's head search: each head of its critical layers (one or two) ablated alone in the minimal model, MMLU."""

import json

import pandas as pd

from gna.experiments.head_selection import no_critical_note
from gna.experiments.run import condition_rows, write_answers
from gna.io import write_csv
from gna.models import describe, load_model
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    depth = json.load(open(snakemake.input.minimal))["minimal_depth"]
    critical = json.load(open(snakemake.input.critical))
    layers = critical["table1_layers"]
    frames, answers = [], []
    if not layers:
        note = no_critical_note(critical)
        log.info("%s: no head to search", note)
        frames.append(pd.DataFrame([{**p.fields, "layer": pd.NA, "head": pd.NA, "note": note}]))
    else:
        model = load_model(p.spec)
        conditions, fields = [], []
        for layer in layers:
            mixers = describe(model[0]).mixers_in(layer)   # a hybrid layer: its attention heads
            mixer = next((m for m in mixers if m.kind == "attention"), mixers[0])
            for head in range(mixer.n_heads):
                conditions.append([{"truncate": depth}, {"ablate_heads": [[layer, head, mixer.kind]]}])
                fields.append({**p.fields, "layer": layer, "head": head, "kind": mixer.kind})
        # one request batch at a time, the layers below each head's layer run once for all heads
        for f, rows in zip(fields, condition_rows(p.spec, p.tasks, conditions, p.eval, p.micro_data, fields,
                                                  model=model, answers=answers)):
            frames.append(rows)
            log.info("L%dH%d removed: %s", f["layer"], f["head"],
                     rows[rows.metric == "acc"][["task", "value"]].to_string(index=False, header=False))
    write_csv(pd.concat(frames, ignore_index=True), snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
