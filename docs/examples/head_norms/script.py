"""figures/head_norms.csv: each head's output norm beside its KV-retrieval rank (gna.experiments.head_norms)."""
from gna.experiments import head_norms
from gna.jobs.script_job import job

with job(snakemake):
    p = snakemake.params
    head_norms.write_table(p.specs, dict(zip(p.specs, snakemake.input.rankings)), snakemake.output[0])
