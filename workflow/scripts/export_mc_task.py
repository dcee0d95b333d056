"""A multiple-choice task's rows {prompt, choices, answer}, as lm-eval builds them (masking experiment)."""

from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.experiments.ssm_masking import export_mc_examples
from gna.jobs.script_job import job
from gna.probes.kv import write_jsonl

with job(snakemake) as log:
    p = snakemake.params
    rows = export_mc_examples(snakemake.wildcards.task, TaskSuite(p.micro_data), p.limit)
    write_jsonl(rows, snakemake.output[0])
    log.info("%d rows from %d task(s)", len(rows), len({r["task"] for r in rows}))
