"""Several conditions of one rule in one process: gna.batch (rule batch, batch.smk)."""
from gna.batch import run_conditions

run_conditions(snakemake)
