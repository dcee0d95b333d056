"""One KV retrieval in several prompt formats, on the same keys, values and queries (gna.questions.formats)."""
from gna.jobs.script_job import job
from gna.probes.kv import write_jsonl
from gna.probes.values import DEFAULT_RULE
from gna.questions.formats import format_probes, key_pool

with job(snakemake) as log:
    p = snakemake.params
    probes = format_probes(p.n_pairs, p.n_examples, p.seed, formats=p.formats, separator=p.separator,
                           key_pool=key_pool(p.key_pool), n_options=p.n_options,
                           values=snakemake.wildcards.values_tag.removeprefix("-v") or DEFAULT_RULE)
    for fmt, path in zip(p.formats, snakemake.output):
        write_jsonl(probes[fmt], path)
        log.info("%s: %d examples -> %s", fmt, len(probes[fmt]), path)
