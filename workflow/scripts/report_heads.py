"""Head experiments' tables and figures (one script, dispatching on the rule)."""
import itertools

import pandas as pd

from gna.pipeline import job
from gna.report import heads
from gna.report.common import save_figure

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    if snakemake.rule == "topk_figure":
        save_figure(heads.topk_figure(pd.read_csv(i[0])), o.png, o.pdf)
    else:
        ends = list(itertools.accumulate(p.counts))
        per_model = [list(i)[e - n:e] for e, n in zip(ends, p.counts)]
        if snakemake.rule == "head_keeping_table":
            heads.make_head_keeping(p.models, per_model, p.roles, o.csv, o.md)
        elif snakemake.rule == "kv_pairs_figure":
            heads.make_kv_pairs(p.models, per_model, o.png, o.pdf, o.csv, o.md)
        else:
            title = ("Removing the top-k KV-retrieval heads (slide tables)" if snakemake.wildcards.experiment ==
                     "topk_removal" else "ARC-C chat vs regular under top-k removal")
            heads.make_topk(p.models, per_model, p.roles, p.paper_keys, p.published, title, None, None, o.csv, o.md)
