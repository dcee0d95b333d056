"""A hybrid's attention heads (top-k of the KV ranking among attention heads, or all) masked at the
answer position or ablated whole; evaluate (gna.experiments.hybrid_attention)."""

import pandas as pd

from gna.experiments import hybrid_attention
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    w = snakemake.wildcards
    rows, answers = hybrid_attention.condition_rows(w.mode, w.k, pd.read_csv(snakemake.input.ranking), log=log,
                                                    **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
