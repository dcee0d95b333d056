"""One model, unmodified, on one benchmark task: its rows with n and 95% intervals, its answers, and
the CPU seconds of the evaluation with the questions it scored (gna.experiments.baselines)."""
import time
from pathlib import Path

from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.experiments.baselines import job_items, with_counts
from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv, write_json
from gna.jobs.script_job import job
from gna.models import load_model
from gna.probes.kv import parse_probe_task, probe_suite
from gna.resume.keys import partial_dir
from gna.resume.store import reused_cost

with job(snakemake) as log:
    p, task = snakemake.params, snakemake.wildcards.task
    resumed = (partial_dir(list(snakemake.output)) / "state.sqlite").is_file()
    start = time.process_time()
    model = load_model(p.spec)
    load_s = time.process_time() - start
    if p.source == "kv":
        # with the tokenizer: a probe whose values it makes prefixes of each other is refused here
        suite = TaskSuite(extra=probe_suite([(*parse_probe_task(task), snakemake.input.probe)], tokenizer=model[1]))
    elif p.source == "mmlu":
        suite = TaskSuite(local_mmlu_dir=str(Path(snakemake.input.sample).parent))
    else:
        suite = TaskSuite(local_suite_dir=str(Path(snakemake.input.manifest).parent))
    answers = []
    start = time.process_time()
    rows = evaluation_rows(p.spec, [task], [], p.eval, None, p.fields, model=model, suite=suite, answers=answers)
    # a stopped run's finished requests are reused: what they cost in that run is added to this run's
    reused = reused_cost()
    cpu_s = time.process_time() - start + reused["cpu_s"]
    table = answers[0] if answers else None
    rows = with_counts(rows, table)
    items = job_items(table)
    for r in rows.itertuples():
        log.info("%s %s %s = %.4f (n %s)", r.task, r.metric, r.filter, r.value, r.n)
    log.info("%d questions in %.1f CPU s (%.3f s each); loading %.1f CPU s%s", items, cpu_s,
             cpu_s / max(items, 1), load_s, f"; {reused['units']} units reused, {reused['cpu_s']:.1f} CPU s of "
             f"them from the stopped run, {reused['unpriced_units']} of unknown cost" if reused["units"] else "")
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
    write_json({"model": snakemake.wildcards.model, "task": task, "cpu_s": cpu_s, "items": items,
                "cpu_s_per_item": cpu_s / items if items else None, "load_cpu_s": load_s, "resumed": resumed,
                "reused_units": reused["units"], "unpriced_units": reused["unpriced_units"]},
               snakemake.output.cost)
