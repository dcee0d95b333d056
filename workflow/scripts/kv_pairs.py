"""Fig. 4: KV-retrieval accuracy vs number of pairs, full model or without its Gather / Aggregate head(s),
on one probe set per (pairs, probe seed) (kv_pairs.probe_seeds).

The heads are the config's named ones (a role may have several) or the scan's top head in that role:
classified so (kv_pairs.heads_by role), or by its pattern alone (pattern; gna.experiments.head_selection)."""

import pandas as pd

from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.experiments.head_selection import role_heads, unclassified
from gna.experiments.run import evaluation_rows, write_answers
from gna.io import write_csv
from gna.models import load_model
from gna.jobs.script_job import job
from gna.probes.kv import parse_probe_task, probe_suite

with job(snakemake) as log:
    p = snakemake.params
    condition = snakemake.wildcards.condition
    ga = pd.read_csv(snakemake.input.ga)
    heads_by = p.get("heads_by", "role")
    heads = [] if condition == "full" else role_heads(ga, condition[3:], p.named, heads_by, p.get("threshold"))
    label, answers = " ".join(f"L{h[0]}H{h[1]}" for h in heads) or "none", []
    if condition != "full" and not heads:
        log.info("no head of the scan's top ones is %s %s: nothing to remove",
                 "by its pattern" if heads_by == "pattern" else "classified", condition[3:])
        rows = pd.DataFrame([{**p.fields, "head": "none"}])
    else:
        # one probe set per (pairs, probe seed): the spread over seeds is the probe draw's
        model = load_model(p.spec)
        # with the tokenizer: a probe whose values it makes prefixes of each other is refused before lm-eval runs
        extra = probe_suite([(n, seed, path) for (n, seed), path in zip(p.probes, snakemake.input.probes)],
                            tokenizer=model[1])
        interventions = [{"ablate_heads": heads}] if heads else []
        # kv_pairs.n_examples: each probe set's first n prompts (independent draws: a sample of n)
        settings = {**p.eval, "limit": p.n_examples} if p.get("n_examples") else p.eval
        rows = evaluation_rows(p.spec, list(extra), interventions, settings, None, p.fields, model=model,
                               suite=TaskSuite(extra=extra), answers=answers)
        parts = [parse_probe_task(t) for t in rows.task]
        rows["n_pairs"], rows["probe_seed"] = [n for n, _ in parts], [seed for _, seed in parts]
        rows["head"] = label
        rows["heads_from"] = ("named" if p.named else
                              "pattern, unclassified" if unclassified(ga, heads, condition[3:]) else "classified")
        log.info("removed %s", label)
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
