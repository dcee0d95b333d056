"""Remove the top-k heads of the scan's ranking together; evaluate (slide tables, ARC chat).

With ``kinds`` (Zamba2's slide tables: attention) k counts, and ranks among, those heads only."""
import pandas as pd

from gna.experiments.heads import top_heads
from gna.experiments.run import evaluation_rows
from gna.io import write_csv
from gna.pipeline import job

with job(snakemake) as log:
    p = snakemake.params
    ranking = pd.read_csv(snakemake.input.ranking)
    heads = top_heads(ranking, int(snakemake.wildcards.k), kinds=p.kinds)
    log.info("removing %d heads%s: %s", len(heads), f" ({'/'.join(p.kinds)} only)" if p.kinds else "", heads)
    rows = evaluation_rows(p.spec, p.tasks, [{"ablate_heads": heads}], p.eval, p.micro_data,
                           {**p.fields, "head_kinds": "/".join(p.kinds) if p.kinds else "all"})
    write_csv(rows, snakemake.output[0])
