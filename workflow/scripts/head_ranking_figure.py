"""Figure and table of the top heads of every scanned model."""
from gna.jobs.script_job import job
from gna.report import head_scan

with job(snakemake):
    models = snakemake.params.models
    o = snakemake.output
    head_scan.make(dict(zip(models, snakemake.input.ga)), snakemake.params.paper_keys, o.png, o.pdf, o.csv, o.md)
