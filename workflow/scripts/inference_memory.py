"""Inference-memory tables: formula vs published, and measured caches of the study's models."""

from gna.models import load_model
from gna.jobs.script_job import job
from gna.report import inference_memory

with job(snakemake):
    o = snakemake.output
    models = {name: load_model(spec) for name, spec in snakemake.params.specs.items()}
    inference_memory.make(models, o.csv, o.md, o.micro_csv, o.micro_md)
