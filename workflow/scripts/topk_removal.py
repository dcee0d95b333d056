"""Remove the top-k heads of the scan's ranking together; evaluate (slide tables, ARC chat)."""
import pandas as pd

from gna.experiments.heads import top_heads
from gna.experiments.run import evaluation_rows
from gna.io import write_csv
from gna.pipeline import job

with job(snakemake) as log:
    p = snakemake.params
    heads = top_heads(pd.read_csv(snakemake.input.ranking), int(snakemake.wildcards.k))
    log.info("removing %d heads: %s", len(heads), heads)
    rows = evaluation_rows(p.spec, p.tasks, [{"ablate_heads": heads}], p.eval, p.micro_data, p.fields)
    write_csv(rows, snakemake.output[0])
