"""Fig. 4: KV-retrieval accuracy vs number of pairs, full model or without its Gather / Aggregate head(s)
(gna.experiments.kv_pairs)."""

import pandas as pd

from gna.experiments import kv_pairs
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    rows, answers = kv_pairs.condition_rows(snakemake.wildcards.condition, pd.read_csv(snakemake.input.ga),
                                            list(snakemake.input.probes), log=log, **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
