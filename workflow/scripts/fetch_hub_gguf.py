"""Fetch one GGUF file of a Hugging Face repository (needs the hub)."""
import os
import shutil

from gna.errors import GnaError
from gna.io import atomic_path
from gna.jobs.script_job import job

with job(snakemake) as log:
    repo = snakemake.wildcards.repo.replace("--", "/", 1)
    if snakemake.params.offline:
        raise GnaError(f"cannot fetch {snakemake.wildcards.filename} from {repo}: HF_HUB_OFFLINE is set; unset it "
                       "for the fetch (a login node with network), or name a local file (models.<name>.gguf.file)")
    os.environ["HF_HUB_OFFLINE"] = "0"  # the workflow's default for jobs; this rule is the exception
    from huggingface_hub import hf_hub_download

    got = hf_hub_download(repo, snakemake.wildcards.filename, revision=snakemake.params.revision)
    with atomic_path(snakemake.output[0]) as tmp:
        shutil.copyfile(got, tmp)
    log.info("fetched %s from %s", snakemake.wildcards.filename, repo)
