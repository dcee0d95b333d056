"""The baselines table: every (model, task) job's rows and cost, the knowledge means, as CSV and markdown."""
import json

import pandas as pd

from gna.report.baselines import markdown, table
from gna.io import write_csv, write_text
from gna.jobs.script_job import job

with job(snakemake) as log:
    rows = pd.concat([pd.read_csv(f) for f in snakemake.input.rows], ignore_index=True)
    costs = {}
    for f in snakemake.input.costs:
        c = json.loads(open(f).read())
        costs[(c["model"], c["task"])] = c
    t = table(rows, costs)
    write_csv(t, snakemake.output.csv)
    write_text(markdown(t, snakemake.params.sizes_note), snakemake.output.md)
    log.info("%d rows, %d models", len(t), t.model.nunique())
