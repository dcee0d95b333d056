"""figures/ranking_seeds.*: the top heads' mean rank over probe seeds with min-max error bars."""
from gna.jobs.script_job import job
from gna.report import open_questions

with job(snakemake):
    o = snakemake.output
    open_questions.ranking_seeds(list(snakemake.input), snakemake.params.top_k, o.png, o.pdf, o.csv, o.md)
