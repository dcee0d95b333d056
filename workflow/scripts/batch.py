"""Several conditions of one rule in one process: gna.jobs.condition_batches (rule batch, batch.smk)."""

from gna.jobs.condition_batches import run_conditions

run_conditions(snakemake)
