"""Stage 1 of retrieval-guided hybrid distillation (the SSM mixers' matrices), shared by every k and
selection of a state size: gna.hybrid.stage_job."""
from gna.hybrid.stage_job import distill_stage_job
from gna.pipeline import first_input, job

with job(snakemake):
    p = snakemake.params
    distill_stage_job(p.spec, dict(p.run), int(snakemake.wildcards.state), 0, "none", snakemake.output[0], p.ckpt,
                      p.micro_data, list(snakemake.input.teacher), tokens=first_input(snakemake, "tokens"),
                      save_every=int(snakemake.config["experiments"]["hybrid_distillation"]["save_every"]))
