"""Gather the individual-pruning rows; the two layers whose removal costs MMLU most."""
import pandas as pd

from gna.experiments.pruning import critical_layers
from gna.io import write_csv, write_json
from gna.pipeline import job

with job(snakemake) as log:
    table = pd.concat([pd.read_csv(f) for f in snakemake.input], ignore_index=True)
    n_applicable = table.loc[table.applicable, "layer"].nunique()
    critical = critical_layers(table, snakemake.params.mmlu, n=min(2, n_applicable))
    log.info("critical layers %s", critical)
    write_csv(table, snakemake.output.table)
    write_json({"critical_layers": critical}, snakemake.output.critical)
