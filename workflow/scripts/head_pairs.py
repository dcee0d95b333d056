"""Every pair of a model's top heads ablated together on the KV probe, against independence; the
smallest head sets that take retrieval to chance, by exhaustive search over the candidate pool."""
import pandas as pd

from gna.io import sha256_file, write_csv
from gna.jobs.script_job import job, provenance
from gna.questions.pairs import study_tables

with job(snakemake) as log:
    probe = snakemake.input.probe
    pairs, minimal = study_tables(probe, pd.read_csv(snakemake.input.ranking), model_name=snakemake.wildcards.model,
                                  log=log, **dict(snakemake.params))
    tags = dict(probe=str(probe), probe_sha256=sha256_file(probe), **provenance())
    write_csv(pairs.assign(**tags), snakemake.output.pairs)
    write_csv(minimal.assign(**tags), snakemake.output.minimal)
