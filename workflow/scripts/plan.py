"""The study's resource plan: every job of its DAG with estimated GPU memory, host memory, hours
(gna.plan.study_plan)."""

from gna.jobs.script_job import job
from gna.plan.study_plan import write_study_plan

with job(snakemake) as log:
    p = snakemake.params   # p.study: the config as a param, so that a changed study remakes the plan
    write_study_plan(dict(snakemake.config), snakemake.output.md, snakemake.output.csv, snakefile=p.snakefile,
                     profile=p.profile, confirmation=p.confirmation, log=log)
