"""Score MMLU-format and knowledge tasks with the SSM's G&A heads (named, or the scan's top) masked
(gna.experiments.ssm_masking)."""

from gna.experiments.run import write_answers
from gna.experiments.ssm_masking import masking_condition
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    rows, answers = masking_condition(snakemake.wildcards.mode, snakemake.input.ga, list(snakemake.input.tasks),
                                      log=log, **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
