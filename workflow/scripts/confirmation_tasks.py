"""The confirmation's fresh items: MMLU questions and the local suite's documents the screen did not draw."""
from pathlib import Path

from gna.confirmation.samples import build_mmlu, build_suite, fresh_sizes
from gna.jobs.script_job import job

with job(snakemake) as log:
    p, i, o = snakemake.params, snakemake.input, snakemake.output
    mmlu_size, sizes = fresh_sizes(p.caps, p.knowledge_tasks, p.retrieval_tasks)
    m = build_mmlu(i.mmlu, Path(o.mmlu).parent, p.screen_mmlu["size"], p.screen_mmlu["seed"], mmlu_size, p.seed)
    log.info("MMLU: %d fresh questions of %d (the screen's %d left out; seed %d)", m["size"], m["source_questions"],
             len(m["screen_index"]), p.seed)
    root = Path(i.olmo[0]).parent if i.olmo else None
    s = build_suite(root, Path(o.suite).parent, sizes, p.screen_suite["size"], p.screen_suite["seed"], p.seed)
    for task, e in s["per_task"].items():
        log.info("%s: %d fresh documents of %d (the screen's %d left out)", task, e["size"], e["documents"],
                 len(e["screen_index"]))
