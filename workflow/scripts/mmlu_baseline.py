"""A model on the local MMLU sample in both formats: accuracy with n and its 95% interval per row."""

from pathlib import Path

from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.evaluation.local_mmlu import TASKS
from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    answers = []
    rows = evaluation_rows(p.spec, list(TASKS), [], p.eval, None, p.fields,
                           suite=TaskSuite(local_mmlu_dir=str(Path(snakemake.input.sample).parent)), answers=answers)
    for r in rows.itertuples():
        log.info("%s %s = %.4f (n %d, 95%% CI %.4f-%.4f)", r.task, r.metric, r.value, r.n, r.ci_low, r.ci_high)
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
