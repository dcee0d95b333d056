"""Head experiments' tables and figures (one script, dispatching on the rule)."""
import pandas as pd

from gna.pipeline import job
from gna.report import heads
from gna.report.common import save_figure

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    if snakemake.rule == "head_keeping_table":
        per = len(i) // len(p.models)
        heads.make_head_keeping(p.models, [i[k * per:(k + 1) * per] for k in range(len(p.models))], p.roles,
                                o.csv, o.md)
    elif snakemake.rule == "kv_pairs_figure":
        per = len(i) // len(p.models)
        heads.make_kv_pairs(p.models, [i[k * per:(k + 1) * per] for k in range(len(p.models))], o.png, o.pdf,
                            o.csv, o.md)
    elif snakemake.rule == "topk_tables":
        per = len(i) // len(p.models)
        title = ("Removing the top-k KV-retrieval heads (slide tables)" if snakemake.wildcards.experiment ==
                 "topk_removal" else "ARC-C chat vs regular under top-k removal")
        heads.make_topk(p.models, [i[k * per:(k + 1) * per] for k in range(len(p.models))], p.roles, p.paper_keys,
                        p.published, title, None, None, o.csv, o.md)
    else:
        save_figure(heads.topk_figure(pd.read_csv(i[0])), o.png, o.pdf)
