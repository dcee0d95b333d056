"""A hybrid's attention heads (top-k of the KV ranking among attention heads, or all) masked at the
answer position (last_row: the official Zamba2 experiment) or ablated whole (ablate); evaluate."""

import pandas as pd

from gna.experiments.head_selection import top_heads
from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.jobs.script_job import job

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    ranking = pd.read_csv(snakemake.input.ranking)
    attention = ranking[ranking.kind == "attention"]
    if attention.empty:
        raise ValueError(f"{p.fields['model']} has no attention heads in its ranking: not a hybrid")
    n = len(attention) if w.k == "all" else int(w.k)
    if n > len(attention):
        raise ValueError(f"k = {n} but {p.fields['model']} has {len(attention)} attention heads")
    heads = top_heads(ranking, n, kinds=["attention"])
    if w.mode == "last_row":
        intervention = {"mask_last_row": "all" if w.k == "all" else heads}
    else:
        intervention = {"ablate_heads": heads}
    log.info("%s on %d of %d attention heads: %s", w.mode, len(heads), len(attention), heads)
    answers = []
    rows = evaluation_rows(p.spec, p.tasks, [intervention], p.eval, p.micro_data,
                           {**p.fields, "mode": w.mode, "k": n, "k_label": w.k, "attention_heads": len(attention)},
                           answers=answers)
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
