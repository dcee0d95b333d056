"""MMLU with a head set's output rows masked at each named position set of the prompt in turn."""

from gna.experiments.row_sweep import sweep_rows
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.models import load_model
from gna.jobs.script_job import config_hash, job, provenance
from gna.probes.kv import read_jsonl

with job(snakemake) as log:
    p, head_set = snakemake.params, snakemake.wildcards.head_set
    model, tok = load_model(p.spec)
    heads = p.heads if isinstance(p.heads, str) else [list(h) for h in p.heads]
    tasks = {t: read_jsonl(path) for t, path in zip(p.tasks, snakemake.input.tasks)}
    log.info("row sweep of %s (%s) over %s", head_set, heads, p.conditions)
    answers = []
    rows = sweep_rows(model, tok, tasks, heads, head_set, p.batch_size, p.fields, p.conditions, answers=answers)
    rows["config_hash"] = config_hash([p.spec, p.tasks, heads, list(p.conditions), {t: len(v) for t, v in tasks.items()}])
    rows = rows.assign(**provenance())
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
