"""Table 1: MMLU and knowledge with only the G&A heads of the critical layers kept (four conditions)."""
from gna.jobs.script_job import job, per_model
from gna.report import heads

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    heads.make_head_keeping(p.models, per_model(i, p.counts), p.roles, o.csv, o.md)
