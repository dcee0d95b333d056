"""figures/probe_formats.*: per-format ranks of the top heads, rank correlations, format-sensitive heads."""
from gna.jobs.script_job import job
from gna.report import open_questions

with job(snakemake):
    i, o = snakemake.input, snakemake.output
    open_questions.probe_formats(i.rankings, i.across, snakemake.params.top_k, o.png, o.pdf, o.csv, o.md)
