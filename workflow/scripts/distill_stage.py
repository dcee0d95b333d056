"""Stages 2-3 of retrieval-guided hybrid distillation (2 hidden states, 3 logits): gna.hybrid.stage_job,
on hybrid_distillation.gpus_per_stage x nodes ranks (gna.hybrid.stage_launch)."""

import sys

from gna.hybrid.stage_launch import workflow_stage
from gna.jobs.script_job import first_input, job

with job(snakemake):
    p, wc, i = snakemake.params, snakemake.wildcards, snakemake.input
    workflow_stage(dict(snakemake.config), "distill_stage", dict(wc.items()),
                   dict(spec=p.spec, run=dict(p.run), state=int(wc.state), k=int(wc.k), selection=wc.selection,
                        out=snakemake.output[0], ckpt=p.ckpt, micro_data=p.micro_data, teacher_input=list(i.teacher),
                        previous=first_input(snakemake, "previous"), ranking=first_input(snakemake, "ranking"),
                        tokens=first_input(snakemake, "tokens")),
                   log=sys.stderr)
