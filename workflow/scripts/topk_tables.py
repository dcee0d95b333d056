"""The slide tables: top-k KV heads removed beside the random-k control, and ARC-C chat vs regular,
ours beside the published numbers."""
from gna.jobs.script_job import job, per_model
from gna.report import topk

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    topk.make_topk(p.models, per_model(i, p.counts), p.roles, p.paper_keys, p.published,
                   p.title, None, None, o.csv, o.md)
