"""SSM masking (Fig. 5 / slides): MMLU with the SSM's G&A heads masked fully or to their pattern."""
from gna.jobs.script_job import job
from gna.report import ssm_masking

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    ssm_masking.make_masking(list(i), p.mmlu, o.png, o.pdf, o.csv, o.md)
