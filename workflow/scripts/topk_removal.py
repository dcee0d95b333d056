"""Remove the top-k heads of the scan's ranking together; evaluate (slide tables, ARC chat). Or,
the random-k control (``draw`` wildcard ``-random<seed>``): k heads drawn with that seed among
the same kinds. With ``kv_probes`` (topk_removal.kv_control), each removal is also scored on that
KV probe: the positive control.

With ``kinds`` (Zamba2's slide tables: attention) k counts, and ranks among, those heads only.
In a batch, a model's removals are evaluated together, the layers below each one's lowest removed
head run once (gna.experiments.shared_conditions)."""

import pandas as pd

from gna.experiments.head_selection import random_heads, top_heads
from gna.experiments.run import write_answers
from gna.experiments.shared_conditions import Evaluation, run_one
from gna.io import write_csv


def plan(snakemake, log):
    p = snakemake.params
    ranking = pd.read_csv(snakemake.input.ranking)
    k, draw = int(snakemake.wildcards.k), snakemake.wildcards.get("draw", "")
    if draw:
        heads = random_heads(ranking, k, int(draw.removeprefix("-random")), kinds=p.kinds)
    else:
        heads = top_heads(ranking, k, kinds=p.kinds)
    log.info("removing %d %s heads%s: %s", len(heads), "random" if draw else "top",
             f" ({'/'.join(p.kinds)} only)" if p.kinds else "", heads)
    kv = dict(p.get("kv_probes") or {})   # the positive control: the KV probe beside the tasks
    return Evaluation(p.spec, p.tasks + list(kv), [{"ablate_heads": heads}],
                      {**p.eval, "kv_probes": {name: snakemake.input.kv[0] for name in kv}} if kv else p.eval,
                      p.micro_data,
                      {**p.fields, "head_kinds": "/".join(p.kinds) if p.kinds else "all",
                       "n_heads": int(len(ranking) if not p.kinds else ranking.kind.isin(p.kinds).sum()),
                       "heads": " ".join(f"L{h[0]}H{h[1]}" for h in heads) or "none"},
                      finish=lambda rows, answers: (write_csv(rows, snakemake.output[0]),
                                                    write_answers(answers, snakemake.output.answers)))


if __name__ == "__main__":
    run_one(snakemake, plan)
