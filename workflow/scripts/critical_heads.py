"""Table 1's head search: each head of its critical layers (one or two) ablated alone in the minimal model, MMLU
(gna.experiments.head_keeping)."""

import json

from gna.experiments import head_keeping
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    rows, answers = head_keeping.head_search_rows(json.load(open(snakemake.input.minimal)),
                                                  json.load(open(snakemake.input.critical)), log=log,
                                                  **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
