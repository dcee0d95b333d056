"""Generate one KV-retrieval probe set (JSONL, readable by the scorer and by lm-eval)."""
from gna.jobs.script_job import job
from gna.probes.kv import generate_kv_probe, write_jsonl
from gna.probes.values import DEFAULT_RULE

with job(snakemake) as log:
    w = snakemake.wildcards
    examples = generate_kv_probe(int(w.n_pairs), snakemake.params.n_examples, int(w.seed),
                                 separator=snakemake.params.separator, fmt=w.fmt,
                                 values=w.values_tag.removeprefix("-v") or DEFAULT_RULE)  # "": the paper's 0-99
    write_jsonl(examples, snakemake.output[0])
    log.info("wrote %d examples", len(examples))
