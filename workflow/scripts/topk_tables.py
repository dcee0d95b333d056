"""The slide tables: top-k KV heads removed beside the random-k control (topk_removal), and ARC-C
chat vs regular (arc_chat), ours beside the published numbers."""
from gna.jobs.script_job import job, per_model
from gna.report import heads

TITLES = {"topk_removal": "Removing the top-k KV-retrieval heads (slide tables)",
          "arc_chat": "ARC-C chat vs regular under top-k removal"}

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    heads.make_topk(p.models, per_model(i, p.counts), p.roles, p.paper_keys, p.published,
                    TITLES[snakemake.wildcards.experiment], None, None, o.csv, o.md)
