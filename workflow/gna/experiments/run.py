"""One evaluation job: load a model, apply interventions, evaluate through lm-eval, tidy rows."""
from __future__ import annotations

import pandas as pd

from ..evaluation.items import COLUMNS
from ..evaluation.lm_eval_bridge import TaskSuite, evaluate, tidy
from ..interventions.vocabulary import label
from ..io import write_csv
from ..models import load_model
from ..jobs.script_job import config_hash, provenance


def evaluation_rows(spec: dict, tasks: list[str], interventions: list[dict], eval_cfg: dict,
                    micro_data: str | None, fields: dict, model=None, suite: TaskSuite | None = None,
                    answers: list | None = None) -> pd.DataFrame:
    """Tidy rows (``fields`` + intervention, task, metric, value, provenance) of one condition.

    ``eval_cfg``: the study's validated ``eval`` settings (every key, the schema's defaults filled in)
    and ``chat_tasks``, as the workflow's ``eval_params`` passes them (with ``local_mmlu_dir`` and
    ``local_suite_dir``, the folders of the local MMLU tasks and of the pinned benchmarks' tasks, where
    the study evaluates them). ``model``: an already loaded ``(model, tokenizer)``; ``suite``: tasks
    beyond the config's. ``answers``: a list to which the condition's per-question answers are appended
    (:mod:`gna.evaluation.items`' table, with ``fields`` and the intervention in front), for
    :func:`write_answers`."""
    if model is None:
        model, tokenizer = load_model(spec)
    else:
        model, tokenizer = model
    suite = suite or TaskSuite(micro_data, local_mmlu_dir=eval_cfg.get("local_mmlu_dir"),
                               local_suite_dir=eval_cfg.get("local_suite_dir"))
    results = evaluate(model, tokenizer, tasks, suite, interventions,
                       batch_size=eval_cfg["batch_size"], max_length=eval_cfg["max_length"],
                       limit=eval_cfg["limit"], chat_tasks=tuple(eval_cfg["chat_tasks"]),
                       num_fewshot=eval_cfg["num_fewshot"], add_bos_token=eval_cfg["add_bos_token"],
                       fewshot_as_multiturn=eval_cfg["fewshot_as_multiturn"],
                       task_definitions=eval_cfg["task_definitions"],
                       shared_prefix=eval_cfg.get("shared_prefix", False), items=answers is not None)
    if answers is not None:
        named = {**fields, "intervention": label(interventions)}
        answers.append(results.answers.assign(**named)[[*named, *COLUMNS]])
    return tidy(results, eval_cfg["num_fewshot"], **fields, intervention=label(interventions),
                config_hash=config_hash([spec, tasks, interventions, eval_cfg]), **provenance())


def write_answers(answers: list[pd.DataFrame], path) -> None:
    """The per-question answers ``evaluation_rows`` collected in ``answers``, as one table at ``path``
    (atomically; only the item columns where a job evaluated nothing)."""
    write_csv(pd.concat(answers, ignore_index=True) if answers else pd.DataFrame(columns=COLUMNS), path)
