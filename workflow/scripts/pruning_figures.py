"""Figs. 2-3 and their table."""
from gna.jobs.script_job import job
from gna.report import pruning

with job(snakemake):
    i, p = snakemake.input, snakemake.params
    pruning.make(p.models, i.gradual, i.individual, i.minimal, p.mmlu, p.knowledge, snakemake.output)
