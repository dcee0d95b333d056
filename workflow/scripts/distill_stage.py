"""Stages 2-3 of retrieval-guided hybrid distillation (2 hidden states, 3 logits): gna.hybrid.stage_job."""
from gna.hybrid.stage_job import distill_stage_job
from gna.pipeline import first_input, job

with job(snakemake):
    p, wc, i = snakemake.params, snakemake.wildcards, snakemake.input
    distill_stage_job(p.spec, dict(p.run), int(wc.state), int(wc.k), wc.selection, snakemake.output[0], p.ckpt,
                      p.micro_data, list(i.teacher), previous=first_input(snakemake, "previous"),
                      ranking=first_input(snakemake, "ranking"), tokens=first_input(snakemake, "tokens"),
                      # not a param: changing it changes no result, so it must not rerun the stages
                      save_every=int(snakemake.config["experiments"]["hybrid_distillation"]["save_every"]))
