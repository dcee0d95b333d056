"""Remove the top-k heads of the scan's ranking together; evaluate (slide tables, ARC chat). Or,
the random-k control (``draw`` wildcard ``-random<seed>``); with ``kv_probes`` each removal is also
scored on that KV probe, the positive control (gna.experiments.topk). In a batch, a model's removals
are evaluated together, the layers below each one's lowest removed head run once
(gna.experiments.shared_conditions)."""

import pandas as pd

from gna.experiments.run import write_answers
from gna.experiments.shared_conditions import run_one
from gna.experiments.topk import removal
from gna.io import write_csv


def plan(snakemake, log):
    w, kv = snakemake.wildcards, snakemake.input.get("kv")
    return removal(pd.read_csv(snakemake.input.ranking), int(w.k), w.get("draw", ""), kv[0] if kv else None,
                   log=log, finish=lambda rows, answers: (write_csv(rows, snakemake.output[0]),
                                                          write_answers(answers, snakemake.output.answers)),
                   **dict(snakemake.params))


if __name__ == "__main__":
    run_one(snakemake, plan)
