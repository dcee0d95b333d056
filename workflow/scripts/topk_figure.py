"""The top-k removal figure, from its table."""
import pandas as pd

from gna.jobs.script_job import job
from gna.report import topk
from gna.report.common import save_figure

with job(snakemake):
    save_figure(topk.topk_figure(pd.read_csv(snakemake.input[0])), snakemake.output.png, snakemake.output.pdf)
