"""Remove one layer from the minimal model and evaluate (layers past the minimal depth: n/a)."""

import json

import pandas as pd

from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    depth = json.load(open(snakemake.input.minimal))["minimal_depth"]
    layer, answers = int(snakemake.wildcards.layer), []
    if layer >= depth:
        log.info("layer %d is not in the minimal model (depth %d): nothing to evaluate", layer, depth)
        rows = pd.DataFrame([{**p.fields, "applicable": False, "minimal_depth": depth}])
    else:
        interventions = [{"truncate": depth}, {"drop_layer": layer}]
        rows = evaluation_rows(p.spec, p.tasks, interventions, p.eval, p.micro_data, p.fields, answers=answers)
        rows["applicable"], rows["minimal_depth"] = True, depth
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
