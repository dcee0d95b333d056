"""figures/ga_paths.*: the Gather-to-Aggregate matrix of path-patched KV drops."""
from gna.jobs.script_job import job
from gna.report import open_questions

with job(snakemake):
    o = snakemake.output
    open_questions.ga_paths(list(snakemake.input), o.png, o.pdf, o.csv, o.md)
