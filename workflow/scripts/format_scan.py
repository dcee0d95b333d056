"""The head scan under every prompt format; rank correlations and the ranking across formats."""
from gna.io import write_csv
from gna.jobs.script_job import job, provenance
from gna.questions.formats import format_rankings

with job(snakemake) as log:
    rankings, across = format_rankings(list(snakemake.input.probes), model_name=snakemake.wildcards.model, log=log,
                                       **dict(snakemake.params))
    tags = provenance()
    write_csv(rankings.assign(**tags), snakemake.output.rankings)
    write_csv(across.assign(**tags), snakemake.output.ranking)
