"""Heatmaps of the top Gather and Aggregate heads of each model on one KV prompt."""

from gna.models import load_model
from gna.jobs.script_job import job
from gna.probes.kv import read_jsonl
from gna.report import heatmaps

with job(snakemake):
    specs = snakemake.params.specs
    models = {name: load_model(spec) for name, spec in specs.items()}
    prompt = read_jsonl(snakemake.input.probe)[0]["prompt"]
    heatmaps.make(models, dict(zip(specs, snakemake.input.ga)), prompt, snakemake.output.png, snakemake.output.pdf)
