"""Table 1: minimal model, critical layers keep only their top-ranked head (or none)."""
import json

import pandas as pd

from gna.experiments.heads import head_keeping
from gna.experiments.run import evaluation_rows
from gna.io import write_csv
from gna.pipeline import job

with job(snakemake) as log:
    p = snakemake.params
    depth = json.load(open(snakemake.input.minimal))["minimal_depth"]
    critical = json.load(open(snakemake.input.critical))["critical_layers"]
    if len(critical) < 2:
        raise ValueError(f"head keeping needs two critical layers; the minimal model (depth {depth}) has {critical}")
    keep, kept = head_keeping(critical, pd.read_csv(snakemake.input.ranking), snakemake.wildcards.condition)
    log.info("critical layers %s, kept %s", critical, kept)
    rows = evaluation_rows(p.spec, p.tasks, [{"truncate": depth}, *keep], p.eval, p.micro_data,
                           {**p.fields, "first_layer": f"L{critical[0]}", "first_kept": kept[f"L{critical[0]}"],
                            "second_layer": f"L{critical[1]}", "second_kept": kept[f"L{critical[1]}"]})
    write_csv(rows, snakemake.output[0])
