"""Evaluate a distilled hybrid student (or its teacher): KV retrieval, SWDE-like, MMLU, knowledge,
LAMBADA through lm-eval, plus perplexity on held-out distillation data (gna.experiments.hybrid_distillation)."""

from gna.experiments.hybrid_distillation import student_rows
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.jobs.script_job import first_input, job

with job(snakemake) as log:
    rows, answers = student_rows(snakemake.wildcards.variant, list(snakemake.input.probes),
                                 list(snakemake.input.top1_probes), first_input(snakemake, "tokens"), log=log,
                                 **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
