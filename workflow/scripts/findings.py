"""figures/findings.md: the paper's claims, checked against this run's tables."""
from pathlib import Path

from gna.jobs.script_job import job
from gna.report import findings

with job(snakemake) as log:
    p = snakemake.params
    table = findings.make(Path(snakemake.output[0]).parent, snakemake.output[0], list(p.sections),
                          settings=dict(p.settings), rankings=dict(p.rankings),
                          verdicts_csv=snakemake.output.csv, verdicts_png=snakemake.output.png,
                          verdicts_pdf=snakemake.output.pdf)
    log.info("\n%s", table.to_string())
