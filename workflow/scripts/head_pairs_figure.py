"""figures/head_pairs.*: the pair-interaction matrices and the greedy smallest set beside the top-k."""
from gna.jobs.script_job import job
from gna.report import open_questions

with job(snakemake):
    i, o = snakemake.input, snakemake.output
    open_questions.head_pairs(i.pairs, i.minimal, i.ga, o.png, o.pdf, o.csv, o.md, o.minimal)
