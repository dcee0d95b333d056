"""Stages 2-3 of retrieval-guided hybrid distillation (2 hidden states, 3 logits): gna.hybrid.stage_job,
on hybrid_distillation.gpus_per_stage x nodes ranks."""

import sys

from gna.experiments.distill_ranks import stage_world
from gna.hybrid.stage_job import stage_on_ranks
from gna.jobs.script_job import first_input, job

with job(snakemake):
    p, wc, i = snakemake.params, snakemake.wildcards, snakemake.input
    d = snakemake.config["experiments"]["hybrid_distillation"]
    # save_every and the ranks are read from the config, not params: they change no result (to the
    # rounding of the gradients' sums, for the ranks), so they must not rerun the stages
    stage_on_ranks(dict(spec=p.spec, run=dict(p.run), state=int(wc.state), k=int(wc.k), selection=wc.selection,
                        out=snakemake.output[0], ckpt=p.ckpt, micro_data=p.micro_data, teacher_input=list(i.teacher),
                        previous=first_input(snakemake, "previous"), ranking=first_input(snakemake, "ranking"),
                        tokens=first_input(snakemake, "tokens"), save_every=int(d["save_every"])),
                   *stage_world(d), log=sys.stderr,
                   cpu_ranks=bool(d.get("cpu_ranks")))
