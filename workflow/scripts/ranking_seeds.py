"""A model's rankings over the probe seeds: rank spread per head, top-k overlap, the ranking by mean rank;
every head ablated alone again on every seed's prompts for rank intervals over prompts and seeds."""
import pandas as pd

from gna.io import sha256_file, write_csv
from gna.jobs.script_job import job
from gna.models import describe, load_model
from gna.probes.kv import read_jsonl
from gna.probes.scoring import encode
from gna.questions.head_sets import ablate_sets
from gna.questions.stability import rank_intervals, rank_spread, stable_ranking

with job(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    # the scan's own ranking carries no hash column: every seed's is taken from its probe file here
    rankings = pd.concat([pd.read_csv(r).assign(probe_seed=s, probe=str(pr), probe_sha256=sha256_file(pr))
                          for r, s, pr in zip(i.rankings, p.seeds, i.probes)], ignore_index=True)
    spread = rank_spread(rankings, p.top_k)
    model, tok = load_model(p.spec)
    heads = [h for h in describe(model).heads() if h in set(zip(rankings.layer, rankings["head"], rankings.kind))]
    per_seed = {s: ablate_sets(model, encode(read_jsonl(pr), tok), [[h] for h in heads], outcomes=True,
                               batch_size=p.batch_size, max_rows=p.max_rows)[1] for s, pr in zip(p.seeds, i.probes)}
    intervals = rank_intervals(heads, per_seed, p.top_k)
    spread = spread.merge(intervals, on=["layer", "head", "kind"], how="left").sort_values("pooled_rank")
    log.info("top-%d overlap over seeds %s: %.2f (min %.2f); %d heads beyond noise, stable %s\n%s", p.top_k, p.seeds,
             spread.topk_overlap.iloc[0], spread.topk_overlap_min.iloc[0], int(spread.stable_k.iloc[0]),
             bool(spread.stable.iloc[0]), spread.head(10).to_string())
    write_csv(spread, snakemake.output.spread)
    write_csv(stable_ranking(spread.sort_values(["mean_rank", "layer", "kind", "head"]).reset_index(drop=True)),
              snakemake.output.ranking)
