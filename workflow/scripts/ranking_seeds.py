"""A model's rankings over the probe seeds: rank spread per head, top-k overlap, the ranking by mean rank;
every head ablated alone again on every seed's prompts for rank intervals over prompts and seeds."""
from gna.io import write_csv
from gna.jobs.script_job import job
from gna.questions.stability import seed_rankings

with job(snakemake) as log:
    spread, ranking = seed_rankings(list(snakemake.input.rankings), list(snakemake.input.probes), log=log,
                                    **dict(snakemake.params))
    write_csv(spread, snakemake.output.spread)
    write_csv(ranking, snakemake.output.ranking)
