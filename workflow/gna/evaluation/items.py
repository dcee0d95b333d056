"""Each question's answer in an evaluation: lm-eval's logged samples as one tidy table.

One row per (task, filter, metric, question), keyed as the result rows are (task, metric, filter)
so that a result row's value is the mean of its items' ``value`` (for the metrics lm-eval averages:
acc, acc_norm, exact_match, contains...). Columns:

- ``doc_id``: the question's index in the task's test split (lm-eval's), ``item``: the first 16 hex
  digits of lm-eval's ``doc_hash`` (sha256 of the question's document): the same question has the
  same ``item`` in every condition, whatever its position;
- ``target``: the gold answer (a choice index for multiple choice, the text for generation);
- ``chosen``: the choice with the highest summed log-probability (what ``acc`` scores; ``acc_norm``
  normalises by length and can choose another), empty where the task is not multiple choice;
- ``answer``: the filtered generation (generation tasks), else empty;
- ``value``: lm-eval's per-question value of the metric (0/1 for acc, acc_norm, exact_match);
- ``margin``: on a multiple-choice ``acc`` row, the gold choice's summed log-probability minus the best
  other choice's (what ``acc`` thresholds at 0: a continuous, paired measure of the same answer); empty
  on other rows and where the target is no choice index that agrees with ``acc`` (WinoGrande's partial
  scoring, whose choices are contexts).

The prompts, documents and raw responses lm-eval logs are not kept: they are the same in every
condition and would make the table many times larger than the answers.
"""
from __future__ import annotations

import pandas as pd

COLUMNS = ["task", "filter", "metric", "doc_id", "item", "target", "chosen", "answer", "value", "margin"]
KEYS = ["task", "filter", "metric", "doc_id"]
"""A question in one evaluation: the columns that name a row."""


def _is_loglikelihood(resp) -> bool:
    return isinstance(resp, (tuple, list)) and len(resp) == 2 and isinstance(resp[0], (int, float))


def _margin(resps, target) -> float | None:
    """The gold choice's log-probability minus the best other's (None: no single gold index)."""
    try:
        gold = int(target)
    except (TypeError, ValueError):
        return None
    if not 0 <= gold < len(resps):
        return None
    return float(resps[gold][0]) - max(float(r[0]) for i, r in enumerate(resps) if i != gold)


def item_rows(task: str, samples: list[dict]) -> pd.DataFrame:
    """The table of ``task``'s logged samples (``simple_evaluate(log_samples=True)["samples"][task]``)."""
    rows = []
    for s in samples:
        resps = s["filtered_resps"]
        multiple_choice = len(resps) > 1 and all(_is_loglikelihood(r) for r in resps)
        chosen = max(range(len(resps)), key=lambda i: resps[i][0]) if multiple_choice else None
        generated = len(resps) == 1 and isinstance(resps[0], str)
        margin = _margin(resps, s["target"]) if multiple_choice else None
        for metric in s["metrics"]:
            value = s[metric]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                value = float(value) if isinstance(value, bool) else None
            if value is None:   # a per-question tuple some aggregations take (bleu, f1): no score of its own
                continue
            rows.append({"task": task, "filter": s["filter"], "metric": metric, "doc_id": int(s["doc_id"]),
                         "item": str(s["doc_hash"])[:16], "target": str(s["target"]), "chosen": chosen,
                         "answer": resps[0] if generated else None, "value": float(value),
                         "margin": margin if metric == "acc" and margin is not None and (margin > 0) == (value == 1)
                         else None})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["chosen"] = out["chosen"].astype("Int64")
    return out.sort_values(KEYS, kind="stable").reset_index(drop=True)



def own_rows(task: str, examples: list[dict], values, metric: str = "acc", chosen=None) -> pd.DataFrame:
    """The same table for a task the project scores itself (no lm-eval samples to log: the masking
    experiments' multiple choice, the hybrids' KV top-1): ``examples`` ``{prompt, choices, answer}`` and
    each one's 0/1 ``values`` (``chosen``: the choice each picked, where it picks one). ``doc_id`` is the
    example's place in its file (its row in every condition, the file being one), ``item`` a content
    hash of prompt, choices and gold (so that another file under the same places is refused when paired)."""
    import hashlib
    import json

    chosen = [None] * len(examples) if chosen is None else list(chosen)
    rows = [{"task": task, "filter": "none", "metric": metric, "doc_id": i,
             "item": hashlib.sha256(json.dumps([ex["prompt"], list(ex["choices"]), int(ex["answer"])])
                                    .encode()).hexdigest()[:16],
             "target": str(int(ex["answer"])), "chosen": c, "answer": None, "value": float(v), "margin": None}
            for i, (ex, v, c) in enumerate(zip(examples, values, chosen, strict=True))]
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["chosen"] = out["chosen"].astype("Int64")
    return out


def scored_rows(task: str, examples: list[dict], logprobs) -> pd.DataFrame:
    """:func:`own_rows` of multiple choice scored by :mod:`gna.probes.scoring`: ``logprobs`` (N, C), the
    choice chosen their argmax and right where it is the gold one, as ``acc`` scores it."""
    chosen = [int(c) for c in logprobs.argmax(-1).tolist()]
    return own_rows(task, examples, [c == int(ex["answer"]) for c, ex in zip(chosen, examples)], chosen=chosen)
