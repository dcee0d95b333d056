"""MMLU from the local test set: a stratified, seeded sample and the letter and cloze lm-eval tasks over it."""

from pathlib import Path

from gna.evaluation.local_mmlu import build
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    manifest = build(snakemake.input[0], Path(snakemake.output.sample).parent, p.size, p.seed)
    log.info("%d of %d questions (seed %d, sample sha256 %s; source sha256 %s, %d header row(s) dropped)",
             manifest["size"], manifest["source_questions"], p.seed, manifest["sample_sha256"],
             manifest["source_sha256"], manifest["source_header_rows_dropped"])
