"""A model's rankings over the probe seeds: rank spread per head, top-k overlap, the ranking by mean rank."""
import pandas as pd

from gna.io import sha256_file, write_csv
from gna.jobs.script_job import job
from gna.questions.stability import rank_spread, stable_ranking

with job(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    # the scan's own ranking carries no hash column: every seed's is taken from its probe file here
    rankings = pd.concat([pd.read_csv(r).assign(probe_seed=s, probe=str(pr), probe_sha256=sha256_file(pr))
                          for r, s, pr in zip(i.rankings, p.seeds, i.probes)], ignore_index=True)
    spread = rank_spread(rankings, p.top_k)
    log.info("top-%d overlap over seeds %s: %.2f (min %.2f)\n%s", p.top_k, p.seeds, spread.topk_overlap[0],
             spread.topk_overlap_min[0], spread.head(10).to_string())
    write_csv(spread, snakemake.output.spread)
    write_csv(stable_ranking(spread), snakemake.output.ranking)
