"""Several conditions of one rule in one process: gna.condition_batches (rule batch, batch.smk)."""

from gna.condition_batches import run_conditions

run_conditions(snakemake)
