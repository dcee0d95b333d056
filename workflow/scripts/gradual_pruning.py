"""Fig. 2: one model truncated to a depth (its first n layers), evaluated on MMLU and knowledge."""

from gna.experiments.run import evaluation_rows
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake):
    p = snakemake.params
    rows = evaluation_rows(p.spec, p.tasks, p.interventions, p.eval, p.micro_data, p.fields)
    write_csv(rows, snakemake.output[0])
