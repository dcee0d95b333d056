"""The hybrid study's evaluation (rule evaluate_hybrid): a distilled student, or its teacher, on KV retrieval,
the study's tasks through lm-eval, and the perplexity of held-out distillation data. The students are
trained by :mod:`gna.hybrid`; scored here like any other condition (:mod:`gna.experiments.run`).

KV retrieval is scored twice on probe sets of their own seeds (never the ranking's), each named as every
probe set is (:func:`gna.probes.kv.probe_task_name`): the multiple choice through lm-eval (metric ``acc``)
and mohawk's KV-Ret, the argmax over the vocabulary (metric ``top1``, :func:`gna.probes.top1.kv_top1_hits`),
each prompt's hit kept for the findings to pair two students prompt by prompt. The table's rows call both
task ``kv_retrieval``, the probe seed beside them.

The computation layer of the experiment ``hybrid_distillation``, its students' evaluation (their training
is :mod:`gna.hybrid`). One concept at three layers: :mod:`gna.report.hybrid_distillation` makes its tables
and figure, :mod:`gna.report.findings.hybrid_distillation` judges them."""
from __future__ import annotations

import logging

import pandas as pd

from ..evaluation.items import own_rows
from ..evaluation.lm_eval_bridge import TaskSuite
from ..hybrid.study.data import heldout_perplexity, make_stream
from ..hybrid.study.variants import parse_variant
from ..models import describe, load_model
from ..probes.kv import parse_probe_task, probe_suite, probe_task_name, read_jsonl
from ..probes.top1 import kv_top1_hits
from .run import evaluation_rows


def _probe_sets(paths: list[str], seeds: list[int]) -> list[tuple[int, int, str]]:
    """``(n_pairs, seed, path)`` of each probe file, its pairs read off its first prompt."""
    return [(int(read_jsonl(path)[0]["n_pairs"]), int(s), path) for s, path in zip(seeds, paths)]


def student_rows(variant: str, probes: list[str], top1_probes: list[str], tokens: str | None, *, spec: dict,
                 tasks: list[str], fields: dict, eval: dict, micro_data: str | None, kv_seeds: list[int],
                 data: dict, heldout_batches: int, seed: int,
                 log: logging.Logger) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The rows and answers of one student (``variant``, as :func:`gna.hybrid.study.variants.parse_variant`
    reads it) or of the teacher (``variant`` teacher): ``probes`` / ``top1_probes`` one file per seed of
    ``kv_seeds``; ``tokens`` the held-out web tokens (None on micro data)."""
    model, tok = load_model(spec)
    kv = probe_suite(_probe_sets(probes, kv_seeds), tokenizer=tok)
    answers = []
    rows = evaluation_rows(spec, [*tasks, *kv], [], eval, micro_data, fields, model=(model, tok),
                           suite=TaskSuite(micro_data, extra=kv), answers=answers)
    is_kv = rows.task.isin(list(kv))
    rows["probe_seed"] = rows.task.map({t: parse_probe_task(t)[1] for t in kv}).astype("Int64")
    rows.loc[is_kv, "task"] = "kv_retrieval"
    top1 = []
    for s, path in zip(kv_seeds, top1_probes):
        examples = read_jsonl(path)
        n_pairs = int(examples[0]["n_pairs"])
        hits = kv_top1_hits(model, tok, examples, eval["batch_size"])
        answers.append(own_rows(probe_task_name(n_pairs, s), examples, hits, metric="top1").assign(**fields))
        top1.append({**rows.iloc[0].to_dict(), "task": "kv_retrieval", "metric": "top1", "filter": "none",
                     "task_version": pd.NA, "probe_seed": s, "n_pairs": n_pairs,
                     "value": sum(hits) / max(len(hits), 1)})
    rows = pd.concat([rows, pd.DataFrame(top1)], ignore_index=True)
    held = make_stream(data, tok, micro_data, seed, purpose="heldout", shards=tokens)
    ppl = heldout_perplexity(model, held, heldout_batches)
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
    return rows, answers
