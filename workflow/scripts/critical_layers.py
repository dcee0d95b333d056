"""Gather the individual-pruning rows; the critical layers (MMLU collapses, knowledge stays)."""
import json

import pandas as pd

from gna.experiments.pruning import critical_layers, critical_pair, critical_table, metric_by
from gna.io import write_csv, write_json
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    table = pd.concat([pd.read_csv(f) for f in snakemake.input.layers], ignore_index=True)
    depth = json.load(open(snakemake.input.minimal))["minimal_depth"]
    gradual = pd.read_csv(snakemake.input.gradual)
    base_mmlu = float(metric_by(gradual, "depth", p.mmlu)[depth])
    base_knowledge = float(metric_by(gradual, "depth", p.knowledge)[depth])
    verdicts = critical_table(table, p.mmlu, p.knowledge, base_mmlu, base_knowledge, chance=p.chance,
                              collapse=p.collapse, knowledge_tolerance=p.knowledge_tolerance)
    critical, pair = critical_layers(verdicts), critical_pair(verdicts)
    log.info("minimal model (depth %d): MMLU %.3f, knowledge %.3f\n%s\ncritical layers %s, Table 1 pair %s",
             depth, base_mmlu, base_knowledge, verdicts.to_string(index=False), critical, pair)
    write_csv(table, snakemake.output.table)
    write_json({"critical_layers": critical, "pair": pair, "minimal_depth": depth, "base_mmlu": base_mmlu,
                "base_knowledge": base_knowledge, "chance": p.chance, "collapse": p.collapse,
                "knowledge_tolerance": p.knowledge_tolerance, "layers": verdicts.to_dict(orient="records")},
               snakemake.output.critical)
