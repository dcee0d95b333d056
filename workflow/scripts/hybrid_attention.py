"""Ablate a hybrid's attention heads (top-k of the KV ranking, or all of them); evaluate (Zamba2 tables)."""
import pandas as pd

from gna.experiments.heads import top_heads
from gna.experiments.run import evaluation_rows
from gna.io import write_csv
from gna.pipeline import job

with job(snakemake) as log:
    p, k = snakemake.params, snakemake.wildcards.k
    ranking = pd.read_csv(snakemake.input.ranking)
    attention = ranking[ranking.kind == "attention"]
    if attention.empty:
        raise ValueError(f"{p.fields['model']} has no attention heads in its ranking: not a hybrid")
    n = len(attention) if k == "all" else int(k)
    if n > len(attention):
        raise ValueError(f"k = {n} but {p.fields['model']} has {len(attention)} attention heads")
    heads = top_heads(ranking, n, kinds=["attention"])
    log.info("ablating %d of %d attention heads: %s", len(heads), len(attention), heads)
    rows = evaluation_rows(p.spec, p.tasks, [{"ablate_heads": heads}], p.eval, p.micro_data,
                           {**p.fields, "k": n, "k_label": k, "attention_heads": len(attention)})
    write_csv(rows, snakemake.output[0])
