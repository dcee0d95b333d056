"""One model, unmodified, on one benchmark task: its rows with n and 95% intervals, its answers, and
the CPU seconds of the evaluation with the questions it scored (gna.experiments.baselines)."""

from gna.experiments.baselines import evaluate_task
from gna.experiments.run import write_answers
from gna.io import write_csv, write_json
from gna.jobs.script_job import job
from gna.resume.keys import partial_dir

with job(snakemake) as log:
    # read before the evaluation, which may create this job's state
    resumed = (partial_dir(list(snakemake.output)) / "state.sqlite").is_file()
    rows, answers, cost = evaluate_task(snakemake.wildcards.task, dict(snakemake.input), resumed=resumed, log=log,
                                        **dict(snakemake.params))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
    write_json(cost, snakemake.output.cost)
