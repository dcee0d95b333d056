"""Fig. 4: KV-retrieval accuracy vs number of pairs, full model or without the top G/A head."""
import pandas as pd

from gna.evaluate import TaskSuite
from gna.experiments.heads import top_role_head
from gna.experiments.run import evaluation_rows
from gna.io import write_csv
from gna.models import load_model
from gna.pipeline import job
from gna.probes.kv import lm_eval_task_config

with job(snakemake) as log:
    p = snakemake.params
    condition = snakemake.wildcards.condition
    head = None if condition == "full" else top_role_head(pd.read_csv(snakemake.input.ga), condition[3:])
    if condition != "full" and head is None:
        log.info("no head of the scan's top ones is classified %s: nothing to remove", condition[3:])
        rows = pd.DataFrame([{**p.fields, "head": "none"}])
    else:
        extra = {f"kv_n{n}": lm_eval_task_config(path, f"kv_n{n}") for n, path in zip(p.pairs, snakemake.input.probes)}
        interventions = [{"ablate_heads": [head]}] if head else []
        model = load_model(p.spec)
        rows = evaluation_rows(p.spec, list(extra), interventions, p.eval, None, p.fields, model=model,
                               suite=TaskSuite(extra=extra))
        rows["n_pairs"] = rows.task.str.removeprefix("kv_n").astype(int)
        rows["head"] = f"L{head[0]}H{head[1]}" if head else "none"
        log.info("removed %s", rows["head"].iloc[0])
    write_csv(rows, snakemake.output[0])
