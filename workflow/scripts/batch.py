"""Several conditions of one rule in one process: gna.condition_batches (rule batch, batch.smk)."""
from gna.warm_start import hand_over

hand_over(snakemake)  # first: a local run's job forks from a warm interpreter (gna.warm_start)

from gna.condition_batches import run_conditions

run_conditions(snakemake)
