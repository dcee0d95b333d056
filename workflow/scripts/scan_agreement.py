"""figures/scan_agreement.*: the atp+exact ranking against the exact one, per model and k."""
import pandas as pd

from gna.jobs.script_job import job
from gna.report.common import write_table
from gna.scan.agreement import agreement

with job(snakemake) as log:
    p = snakemake.params
    frames = []
    for model, exact, fast in zip(p.models, snakemake.input.exact, snakemake.input.fast):
        rows = agreement(pd.read_csv(exact), pd.read_csv(fast))
        rows.insert(0, "model", model)
        frames.append(rows)
        log.info("%s\n%s", model, rows.to_string(index=False))
    table = pd.concat(frames, ignore_index=True)
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="The fast scan (atp+exact) against the exact ranking: the exact top k found in the fast top k")
