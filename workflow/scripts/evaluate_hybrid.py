"""Evaluate a distilled hybrid student (or its teacher): KV retrieval, SWDE-like, MMLU, knowledge,
LAMBADA through lm-eval, plus perplexity on held-out distillation data."""

import pandas as pd

from gna.evaluation.items import own_rows
from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.experiments.run import evaluation_rows, write_answers
from gna.hybrid.study.data import heldout_perplexity, make_stream
from gna.hybrid.study.variants import parse_variant
from gna.io import write_csv
from gna.models import describe, load_model
from gna.jobs.script_job import first_input, job
from gna.probes.kv import lm_eval_task_config, read_jsonl
from gna.probes.top1 import kv_top1_hits

with job(snakemake) as log:
    p, variant = snakemake.params, snakemake.wildcards.variant
    model, tok = load_model(p.spec)
    # KV retrieval on one probe set per seed (never the ranking's): rows task "kv_retrieval", probe_seed
    kv = {f"kv_retrieval_s{s}": (s, path) for s, path in zip(p.kv_seeds, snakemake.input.probes)}
    extra = {name: lm_eval_task_config(path, name, tokenizer=tok) for name, (_, path) in kv.items()}
    answers = []
    rows = evaluation_rows(p.spec, [*p.tasks, *extra], [], p.eval, p.micro_data, p.fields,
                           model=(model, tok), suite=TaskSuite(p.micro_data, extra=extra), answers=answers)
    rows["probe_seed"] = rows.task.map({name: s for name, (s, _) in kv.items()}).astype("Int64")
    rows.loc[rows.task.isin(list(kv)), "task"] = "kv_retrieval"
    # mohawk's KV-Ret beside it (metric "top1": the argmax over the vocabulary; "acc" above: the multiple choice)
    # each prompt's top-1 hit kept too (task kv_retrieval_s<seed>, metric top1), for the findings to pair
    # two students prompt by prompt
    top1 = []
    for s, path in zip(p.kv_seeds, snakemake.input.top1_probes):
        examples = read_jsonl(path)
        hits = kv_top1_hits(model, tok, examples, p.eval["batch_size"])
        answers.append(own_rows(f"kv_retrieval_s{s}", examples, hits, metric="top1").assign(**p.fields))
        top1.append({**rows.iloc[0].to_dict(), "task": "kv_retrieval", "metric": "top1", "filter": "none",
                     "task_version": pd.NA, "probe_seed": s, "n_pairs": examples[0]["n_pairs"],
                     "value": sum(hits) / max(len(hits), 1)})
    rows = pd.concat([rows, pd.DataFrame(top1)], ignore_index=True)
    held = make_stream(p.data, tok, p.micro_data, p.seed, purpose="heldout", shards=first_input(snakemake, "tokens"))
    ppl = heldout_perplexity(model, held, p.heldout_batches)
    rows = pd.concat([rows, pd.DataFrame([{**rows.iloc[0].to_dict(), "task": "heldout", "metric": "perplexity",
                                           "value": ppl}])], ignore_index=True)
    if variant == "teacher":
        n = sum(m.n_heads for m in describe(model).mixers if m.kind == "attention")
        rows["k"], rows["state_size"], rows["selection"], rows["kept_heads"] = n, pd.NA, "teacher", "all"
    else:
        v = parse_variant(variant)
        rows["k"], rows["state_size"], rows["selection"] = v.k, v.state, v.selection
        rows["draw"] = pd.NA if v.draw is None else v.draw
        rows["kept_heads"] = " ".join(f"L{l}H{h}" for l, h in model.config.kept_heads) or "none"
    log.info("%s: held-out perplexity %.3f; %s", variant, ppl,
             rows[rows.metric.isin(["acc", "top1", "perplexity"])][["task", "metric", "value"]].to_string(index=False))
    write_csv(rows, snakemake.output[0])
    write_answers(answers, snakemake.output.answers)
