"""Table 1: minimal model; in the G&A layers keep only the Gather and/or Aggregate heads, or none
(gna.experiments.head_keeping)."""

import json

import pandas as pd

from gna.experiments import head_keeping
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    w, i = snakemake.wildcards, snakemake.input
    rows, answers = head_keeping.condition_rows(
        w.source, w.condition, json.load(open(i.minimal)), json.load(open(i.critical)),
        pd.read_csv(i.heads[0]) if i.heads else None, pd.read_csv(i.ga[0]) if i.ga else None,
        log=log, **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
