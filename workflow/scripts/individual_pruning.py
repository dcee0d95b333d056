"""Remove one layer from the minimal model and evaluate (layers past the minimal depth: n/a).
In a batch, a model's removals are evaluated together, the layers below each removed one run once
(gna.experiments.shared_conditions)."""

import json

import pandas as pd

from gna.experiments.run import write_answers
from gna.experiments.shared_conditions import Evaluation, run_one
from gna.io import write_csv


def plan(snakemake, log):
    p = snakemake.params
    depth = json.load(open(snakemake.input.minimal))["minimal_depth"]
    layer = int(snakemake.wildcards.layer)
    if layer >= depth:
        log.info("layer %d is not in the minimal model (depth %d): nothing to evaluate", layer, depth)
        write_csv(pd.DataFrame([{**p.fields, "applicable": False, "minimal_depth": depth}]), snakemake.output[0])
        write_answers([], snakemake.output.answers)
        return None

    def finish(rows, answers):
        rows["applicable"], rows["minimal_depth"] = True, depth
        write_csv(rows, snakemake.output[0])
        write_answers(answers, snakemake.output.answers)

    return Evaluation(p.spec, p.tasks, [{"truncate": depth}, {"drop_layer": layer}], p.eval, p.micro_data,
                      p.fields, finish)


if __name__ == "__main__":
    run_one(snakemake, plan)
