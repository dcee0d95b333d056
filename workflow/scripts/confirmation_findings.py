"""The confirmation's verdicts, from the fresh answers only (gna.confirmation.judge), the screen's
estimates beside them."""

from gna.confirmation.report import findings_text, forest, read_judged, verdict_rows
from gna.io import write_csv, write_text
from gna.jobs.script_job import job
from gna.report.common import save_figure

with job(snakemake) as log:
    p = snakemake.params
    judged = read_judged(p.models, list(snakemake.input.picks), list(snakemake.input.answers))
    write_text(findings_text(judged, p.settings, p.chance), snakemake.output.md)
    table = verdict_rows(judged, p.settings, p.chance)
    write_csv(table, snakemake.output.csv)
    save_figure(forest(table), snakemake.output.png, snakemake.output.pdf)
