"""Masking, layer-swap and hybrid-distillation tables and figures (one script, dispatching on the rule)."""
import itertools

from gna.pipeline import job
from gna.report import hybrid

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    if snakemake.rule == "ssm_masking_figure":
        hybrid.make_masking(list(i), p.mmlu, o.png, o.pdf, o.csv, o.md)
    elif snakemake.rule == "hybrid_attention_table":
        ends = list(itertools.accumulate(p.counts))
        per_model = [list(i)[e - n:e] for e, n in zip(ends, p.counts)]
        hybrid.make_hybrid_attention(p.models, per_model, p.roles, p.paper_keys, o.csv, o.md)
    elif snakemake.rule == "layer_swap_figure":
        hybrid.make_layer_swap(list(i), p.mmlu, p.knowledge, o.png, o.pdf, o.csv, o.md)
    else:
        hybrid.make_hybrid(list(i), p.roles, p.paper_key, p.state_size, p.state_k, o.png, o.pdf, o.csv, o.md,
                           o.state_csv, o.state_md)
