"""Fig. 7: MMLU and knowledge with one transformer layer swapped into the aligned SSM."""
from gna.jobs.script_job import job
from gna.report import layer_swap

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    layer_swap.make_layer_swap(list(i), p.mmlu, p.knowledge, o.png, o.pdf, o.csv, o.md)
