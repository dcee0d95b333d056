"""Gather the individual-pruning rows; the critical layers (MMLU collapses beyond noise, knowledge
shown to stay), tested on each question's answer; Table 1's layers (gna.experiments.pruning)."""
import json

import pandas as pd

from gna.experiments.pruning import critical_result
from gna.io import write_csv, write_json
from gna.jobs.script_job import job

with job(snakemake) as log:
    i = snakemake.input
    table = pd.concat([pd.read_csv(f) for f in i.layers], ignore_index=True)
    tested = critical_result(table, json.load(open(i.minimal)), pd.read_csv(i.gradual), list(i.gradual_answers),
                             list(i.layer_answers), log=log, **dict(snakemake.params))
    write_csv(table, snakemake.output.table)
    write_json(tested, snakemake.output.critical)
