"""One self-contained HTML page per scanned model: its ranking and patterns, the others beside it."""
from gna.jobs.script_job import job
from gna.report import explorer

with job(snakemake):
    models = [explorer.read_data(p) for p in [snakemake.input.own, *snakemake.input.others]]
    explorer.write(models, snakemake.output[0])
