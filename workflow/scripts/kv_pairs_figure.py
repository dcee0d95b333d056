"""Fig. 4: KV retrieval vs the number of pairs, without the Gather or the Aggregate head."""
from gna.jobs.script_job import job, per_model
from gna.report import heads

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    heads.make_kv_pairs(p.models, per_model(i, p.counts), o.png, o.pdf, o.csv, o.md)
