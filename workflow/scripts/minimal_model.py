"""Gather the gradual-pruning depths; find the minimal model (where MMLU still holds)."""
import pandas as pd

from gna.experiments.pruning import minimal_depth
from gna.io import write_csv, write_json
from gna.jobs.script_job import job

with job(snakemake) as log:
    table = pd.concat([pd.read_csv(f) for f in snakemake.input], ignore_index=True)
    depth = minimal_depth(table, snakemake.params.mmlu, snakemake.params.tolerance)
    log.info("minimal depth %d (tolerance %.3f)", depth, snakemake.params.tolerance)
    write_csv(table, snakemake.output.table)
    write_json({"minimal_depth": depth, "tolerance": snakemake.params.tolerance}, snakemake.output.minimal)
