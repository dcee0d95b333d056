"""Gather the individual-pruning rows; the critical layers (MMLU collapses beyond noise, knowledge
shown to stay), tested on each question's answer; Table 1's layers."""
import json

import pandas as pd

from gna.experiments.pruning import (below_floor, critical_layers, critical_table, knowledge_floor, metric_by,
                                     table1_layers, undecided_layers)
from gna.io import write_csv, write_json
from gna.jobs.script_job import job


def answers(path):
    return pd.read_csv(path, dtype={"item": str, "target": str})


with job(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    table = pd.concat([pd.read_csv(f) for f in i.layers], ignore_index=True)
    minimal = json.load(open(i.minimal))
    depth = minimal["minimal_depth"]
    gradual = pd.read_csv(i.gradual)
    base_mmlu = float(metric_by(gradual, "depth", p.mmlu)[depth])
    base_knowledge = float(metric_by(gradual, "depth", p.knowledge)[depth])
    base_answers = answers(i.gradual_answers[p.depths.index(depth)])
    removed = {layer: answers(f) for layer, f in zip(p.layers, i.layer_answers) if layer < depth}
    verdicts = critical_table(table, p.mmlu, p.knowledge, base_mmlu, base_knowledge, base_answers, removed,
                              chance=p.chance, collapse=p.collapse, knowledge_margin=p.knowledge_margin,
                              knowledge_chance=p.knowledge_chance)
    critical, kept, undecided = critical_layers(verdicts), table1_layers(verdicts), undecided_layers(verdicts)
    floor = knowledge_floor(base_answers, p.knowledge)
    within = float(verdicts.knowledge_margin.iloc[0]) if len(verdicts) else None
    log.info("minimal model (depth %d): MMLU %.3f, knowledge %.3f\n%s\ncritical layers %s, Table 1 layers %s, "
             "undecided %s", depth, base_mmlu, base_knowledge, verdicts.to_string(index=False), critical, kept,
             undecided)
    tested = {"critical_layers": critical, "table1_layers": kept, "undecided_layers": undecided,
              "knowledge_within": within, "knowledge_floor": floor, "minimal_depth": depth,
              "fall": minimal.get("fall"), "candidates": minimal.get("candidates"), "base_mmlu": base_mmlu,
              "base_knowledge": base_knowledge, "chance": p.chance, "collapse": p.collapse,
              "knowledge_margin": p.knowledge_margin, "knowledge_chance": p.knowledge_chance, "test": "paired",
              "layers": verdicts.to_dict(orient="records")}
    if floor_note := below_floor(tested):
        log.warning("%s (a drop where no answer changes): no layer can be shown to keep knowledge on this sample",
                    floor_note)
    write_csv(table, snakemake.output.table)
    write_json(tested, snakemake.output.critical)
