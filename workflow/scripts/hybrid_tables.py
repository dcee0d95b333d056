"""The follow-up's tables and figures: hybrid students by kept heads, and by SSM state size."""
from gna.jobs.script_job import job
from gna.report import hybrid_distillation

with job(snakemake):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    hybrid_distillation.make_hybrid(list(i), p.roles, p.paper_key, p.state_size, p.state_k, o.png, o.pdf, o.csv,
                                    o.md, o.state_csv, o.state_md)
