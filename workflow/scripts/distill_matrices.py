"""Stage 1 of retrieval-guided hybrid distillation (the SSM mixers' matrices), shared by every k and
selection of a state size: gna.hybrid.stage_job, on hybrid_distillation.gpus_per_stage x nodes ranks
(gna.hybrid.stage_launch)."""

import sys

from gna.hybrid.stage_launch import workflow_stage
from gna.jobs.script_job import first_input, job

with job(snakemake):
    p = snakemake.params
    workflow_stage(dict(snakemake.config), "distill_matrices", dict(snakemake.wildcards.items()),
                   dict(spec=p.spec, run=dict(p.run), state=int(snakemake.wildcards.state), k=0, selection="none",
                        out=snakemake.output[0], ckpt=p.ckpt, micro_data=p.micro_data,
                        teacher_input=list(snakemake.input.teacher), tokens=first_input(snakemake, "tokens")),
                   log=sys.stderr)
