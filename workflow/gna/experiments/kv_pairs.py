"""Fig. 4's computation: KV-retrieval accuracy at each pair count, the full model or without its Gather /
Aggregate head(s), on one probe set per (pairs, probe seed): the spread over seeds is the probe draw's.

The heads are the config's named ones (a role may have several) or the scan's top head in that role:
classified so (``heads_by`` role), or by its pattern alone (pattern; :mod:`gna.experiments.head_selection`).

The computation layer of the experiment ``kv_pairs``; its table is :mod:`gna.report.heads`', its claim
checks :mod:`gna.report.findings.heads`' (the head experiments' family modules)."""
from __future__ import annotations

import logging

import pandas as pd

from ..evaluation.lm_eval_bridge import TaskSuite
from ..models import load_model
from ..probes.kv import parse_probe_task, probe_suite
from .head_selection import head_names, role_heads, unclassified
from .run import evaluation_rows


def condition_rows(condition: str, ga: pd.DataFrame, probe_paths: list[str], *, spec: dict, probes: list,
                   fields: dict, eval: dict, named: dict | None = None, n_examples: int | None = None,
                   heads_by: str = "role", threshold: float | None = None,
                   log: logging.Logger) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The rows and the per-prompt answers of one condition (``full``, ``no_gather``, ``no_aggregate``) on
    every probe set: ``probes`` its ``(n_pairs, seed)``, ``probe_paths`` their files, in that order; the
    first ``n_examples`` prompts of each (independent draws: a sample of n) where given. A role with no
    head among the scan's top ones is one row with head ``none`` and no answers: nothing to remove."""
    answers = []
    heads = [] if condition == "full" else role_heads(ga, condition[3:], named, heads_by, threshold)
    label = head_names(heads, "none")
    if condition != "full" and not heads:
        log.info("no head of the scan's top ones is %s %s: nothing to remove",
                 "by its pattern" if heads_by == "pattern" else "classified", condition[3:])
        return pd.DataFrame([{**fields, "head": "none"}]), answers
    model = load_model(spec)
    # with the tokenizer: a probe whose values it makes prefixes of each other is refused before lm-eval runs
    extra = probe_suite([(n, seed, path) for (n, seed), path in zip(probes, probe_paths)], tokenizer=model[1])
    settings = {**eval, "limit": n_examples} if n_examples else eval
    rows = evaluation_rows(spec, list(extra), [{"ablate_heads": heads}] if heads else [], settings, None, fields,
                           model=model, suite=TaskSuite(extra=extra), answers=answers)
    parts = [parse_probe_task(t) for t in rows.task]
    rows["n_pairs"], rows["probe_seed"] = [n for n, _ in parts], [seed for _, seed in parts]
    rows["head"] = label
    rows["heads_from"] = ("named" if named else
                          "pattern, unclassified" if unclassified(ga, heads, condition[3:]) else "classified")
    log.info("removed %s", label)
    return rows, answers
