"""figures/head_pairs.*: the pair-interaction matrices and the greedy smallest set beside the top-k."""
from gna.jobs.script_job import job
from gna.questions import figures

with job(snakemake):
    i, o = snakemake.input, snakemake.output
    figures.head_pairs(i.pairs, i.minimal, i.ga, o.png, o.pdf, o.csv, o.md, o.minimal)
