"""Fetch one pinned artifact (gna.external.artifacts) by exact package versions and sha256."""
from pathlib import Path

from gna.external import artifact_named, fetch_artifact
from gna.errors import ConfigError
from gna.jobs.script_job import job

with job(snakemake) as log:
    artifact = artifact_named(snakemake.wildcards.artifact)
    if snakemake.wildcards.filename != artifact.filename:
        raise ConfigError(f"artifact {artifact.key} is the file {artifact.filename}, not {snakemake.wildcards.filename}")
    fetch_artifact(artifact, Path(snakemake.output[0]).parent, log=log.info)
