"""Section 5.3: Zamba2's attention heads masked at the answer row (or ablated), MMLU and knowledge."""
from gna.jobs.script_job import job, per_model
from gna.report import hybrid_attention

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    hybrid_attention.make_hybrid_attention(p.models, per_model(i, p.counts), p.roles, p.paper_keys, o.csv, o.md)
