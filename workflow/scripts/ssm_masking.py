"""Score MMLU-format and knowledge tasks with the SSM's G&A heads (named, or the scan's top) masked."""

import pandas as pd

from gna.experiments.ssm_masking import masking_rows, named_ssm_heads, ssm_ga_heads
from gna.experiments.run import write_answers
from gna.io import write_csv
from gna.models import load_model
from gna.jobs.script_job import config_hash, job, provenance
from gna.probes.kv import read_jsonl

with job(snakemake) as log:
    p, mode = snakemake.params, snakemake.wildcards.mode
    model, tok = load_model(p.spec)
    if p.named:
        heads, how = named_ssm_heads(model, p.named), "named"
    else:
        heads, how = ssm_ga_heads(pd.read_csv(snakemake.input.ga))
    if how.startswith("fallback"):
        log.warning("the scan classified no %s SSM head among its top ones: using the top-ranked SSM head of the "
                    "earliest (Gather) / latest (Aggregate) layer among them", how.split(":")[1])
    log.info("masking %s (%s)", heads, how)
    tasks = {t: read_jsonl(path) for t, path in zip(p.tasks, snakemake.input.tasks)}
    answers = []
    rows = masking_rows(model, tok, tasks, heads, mode, p.batch_size, p.fields, answers=answers)
    rows["selection"] = how
    rows["config_hash"] = config_hash([p.spec, p.tasks, heads, mode, {t: len(v) for t, v in tasks.items()}])
    for k, v in provenance().items():
        rows[k] = v
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
