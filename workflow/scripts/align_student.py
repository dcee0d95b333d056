"""A Llamba aligned layer by layer to a transformer (MOHAWK stages 1-2, no end-to-end stage):
the micro counterpart of Llamba-8B-unaligned for the layer swap (Fig. 7; gna.hybrid.swap)."""

from gna.hybrid.swap import write_aligned_student
from gna.jobs.script_job import first_input, job

with job(snakemake) as log:
    write_aligned_student(snakemake.output[0], snakemake.input.teacher, first_input(snakemake, "tokens"), log=log,
                          **dict(snakemake.params))
