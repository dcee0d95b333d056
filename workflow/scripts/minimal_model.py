"""Gather the gradual-pruning depths; find the minimal model (where MMLU still holds, judged on each
question's answer) and the depths around Fig. 2's fall, its candidates (gna.experiments.pruning)."""
import pandas as pd

from gna.experiments.pruning import minimal_result
from gna.io import write_csv, write_json
from gna.jobs.script_job import job

with job(snakemake) as log:
    table = pd.concat([pd.read_csv(f) for f in snakemake.input.depths], ignore_index=True)
    minimal = minimal_result(table, list(snakemake.input.answers), log=log, **dict(snakemake.params))
    write_csv(table, snakemake.output.table)
    write_json(minimal, snakemake.output.minimal)
