"""Rank every head by the KV-retrieval drop when it alone is ablated (scan.method); classify the top ones."""

from gna.experiments.head_scan import head_scan
from gna.io import write_csv
from gna.models import load_model
from gna.jobs.script_job import job
from gna.probes.kv import read_jsonl

with job(snakemake) as log:
    p = snakemake.params
    model, tok = load_model(p.spec)
    result = head_scan(model, tok, read_jsonl(snakemake.input.probe), model_name=snakemake.wildcards.model,
                       method=p.method, batch_size=p.batch_size, max_rows=p.max_rows,
                       shared_prefix=p.get("shared_prefix", False), classify_top=p.classify_top,
                       classify_examples=p.classify_examples, threshold=p.threshold, probe_check=p.probe_check,
                       atp=p.atp, what=f"the KV probe {snakemake.input.probe} (scan.probe_check)", say=log.info)
    log.info("%s", result.guard.summary())
    log.info("baseline accuracy %.3f; top heads:\n%s", result.ranking.baseline_accuracy[0], result.ranking.head(10))
    write_csv(result.ga, snakemake.output.ga)
    write_csv(result.ranking, snakemake.output.ranking)
