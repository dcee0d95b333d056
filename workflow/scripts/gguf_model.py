"""Dequantize a GGUF checkpoint once into an ordinary checkpoint directory (the study's dtype)."""
from gna.jobs.script_job import job
from gna.models.gguf import convert_gguf

with job(snakemake) as log:
    convert_gguf(snakemake.input.gguf, snakemake.output[0], dtype=snakemake.params.dtype, log=log.info)
