"""The confirmation's verdicts, from the fresh answers only (gna.confirmation.judge), the screen's
estimates beside them."""
import json

import pandas as pd

from gna.confirmation.report import findings_text, forest, verdict_rows
from gna.report.common import save_figure
from gna.io import write_csv, write_text
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    judged = {}
    for model, path in zip(p.models, snakemake.input.picks):
        plan = json.load(open(path))
        answers = {}
        for claim in plan["claims"]:
            f = f"results/confirmation/{model}/{claim}.answers.csv"
            if plan["claims"][claim]["conditions"]:
                a = pd.read_csv(f)
                answers[claim] = {cid: a[a.condition == cid] for cid in a.condition.unique()}
        judged[model] = (plan, answers)
    write_text(findings_text(judged, p.settings, p.chance), snakemake.output.md)
    table = verdict_rows(judged, p.settings, p.chance)
    write_csv(table, snakemake.output.csv)
    save_figure(forest(table), snakemake.output.png, snakemake.output.pdf)
