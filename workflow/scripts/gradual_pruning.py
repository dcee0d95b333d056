"""Fig. 2: one model truncated to a depth (its first n layers), evaluated on MMLU and knowledge."""

from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake):
    p = snakemake.params
    answers = []
    rows = evaluation_rows(p.spec, p.tasks, p.interventions, p.eval, p.micro_data, p.fields, answers=answers)
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
