"""Stage 1 of retrieval-guided hybrid distillation (the SSM mixers' matrices), shared by every k and
selection of a state size: gna.hybrid.stage_job, on hybrid_distillation.gpus_per_stage x nodes ranks."""

import sys

from gna.experiments.distill_ranks import stage_world
from gna.hybrid.stage_job import stage_on_ranks
from gna.jobs.script_job import first_input, job

with job(snakemake):
    p, d = snakemake.params, snakemake.config["experiments"]["hybrid_distillation"]
    # save_every and the ranks are read from the config, not params: they change no result (to the
    # rounding of the gradients' sums, for the ranks), so they must not rerun the stages
    stage_on_ranks(dict(spec=p.spec, run=dict(p.run), state=int(snakemake.wildcards.state), k=0, selection="none",
                        out=snakemake.output[0], ckpt=p.ckpt, micro_data=p.micro_data,
                        teacher_input=list(snakemake.input.teacher), tokens=first_input(snakemake, "tokens"),
                        save_every=int(d["save_every"])), *stage_world(d), log=sys.stderr,
                   cpu_ranks=bool(d.get("cpu_ranks")))
