"""Row-mask sweep: MMLU per masked position set of the prompt, per model and head set."""
from gna.jobs.script_job import job
from gna.report import row_sweep

with job(snakemake):
    o = snakemake.output
    row_sweep.make_row_sweep(list(snakemake.input), o.png, o.pdf, o.csv, o.md)
