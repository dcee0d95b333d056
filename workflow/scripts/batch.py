"""Several conditions of one rule in one process: gna.jobs.condition_batches (rule batch, batch.smk);
a rule whose conditions share work (gna.experiments.shared_conditions) evaluates them together."""

from gna.jobs.condition_batches import run_conditions

if getattr(snakemake.params, "shared", False):
    from gna.experiments.shared_conditions import run_shared_batch

    run_shared_batch(snakemake)
else:
    run_conditions(snakemake)
