"""One evaluation job: load a model, apply interventions, evaluate through lm-eval, tidy rows.

Shared by every experiment whose jobs evaluate through lm-eval: no one experiment's module."""
from __future__ import annotations

import pandas as pd

from ..evaluation.items import COLUMNS
from ..evaluation.lm_eval_bridge import TaskSuite, evaluate, tidy
from ..evaluation.prefix_conditions import evaluate_conditions
from ..interventions.vocabulary import label
from ..io import write_csv
from ..models import load_model
from ..probes.kv import parse_probe_task, probe_suite
from ..jobs.script_job import config_hash, provenance


def evaluation_rows(spec: dict, tasks: list[str], interventions: list[dict], eval_cfg: dict,
                    micro_data: str | None, fields: dict, model=None, suite: TaskSuite | None = None,
                    answers: list | None = None) -> pd.DataFrame:
    """Tidy rows (``fields`` + intervention, task, metric, value, provenance) of one condition.

    ``eval_cfg``: the study's validated ``eval`` settings (every key, the schema's defaults filled in)
    and ``chat_tasks``, as the workflow's ``eval_params`` passes them (with ``local_mmlu_dir`` and
    ``local_suite_dir``, the folders of the local MMLU tasks and of the pinned benchmarks' tasks, where
    the study evaluates them), and where a job scores KV probe sets beside its tasks, ``kv_probes`` (task
    name, as :func:`gna.probes.kv.probe_task_name` gives it -> probe file; the tasks name them).
    ``model``: an already loaded ``(model, tokenizer)``; ``suite``: tasks beyond the config's.
    ``answers``: a list to which the condition's per-question answers are appended
    (:mod:`gna.evaluation.items`' table, with ``fields`` and the intervention in front), for
    :func:`write_answers`."""
    return condition_rows(spec, tasks, [interventions], eval_cfg, micro_data, [fields], model=model, suite=suite,
                          answers=answers)[0]


def condition_rows(spec: dict, tasks: list[str], conditions: list[list[dict]], eval_cfg: dict,
                   micro_data: str | None, fields: list[dict], model=None, suite: TaskSuite | None = None,
                   answers: list | None = None) -> list[pd.DataFrame]:
    """:func:`evaluation_rows` of each of ``conditions`` (lists of interventions; ``fields``: one per
    condition), the model loaded once and, for several conditions, the layers each leaves unchanged
    run once per batch (:mod:`gna.evaluation.prefix_conditions`): the same rows, and the same answers
    appended to ``answers``, condition after condition."""
    if model is None:
        model, tokenizer = load_model(spec)
    else:
        model, tokenizer = model
    # KV probe sets scored beside the tasks (``kv_probes``: task name -> probe file), encoded with the
    # model's tokenizer: a probe whose values it makes prefixes of each other is refused before lm-eval runs
    kv = probe_suite([(*parse_probe_task(name), path) for name, path in (eval_cfg.get("kv_probes") or {}).items()],
                     tokenizer=tokenizer)
    suite = suite or TaskSuite(micro_data, extra=kv, local_mmlu_dir=eval_cfg.get("local_mmlu_dir"),
                               local_suite_dir=eval_cfg.get("local_suite_dir"))
    settings = dict(batch_size=eval_cfg["batch_size"], max_length=eval_cfg["max_length"],
                    limit=eval_cfg["limit"], chat_tasks=tuple(eval_cfg["chat_tasks"]),
                    num_fewshot=eval_cfg["num_fewshot"], add_bos_token=eval_cfg["add_bos_token"],
                    fewshot_as_multiturn=eval_cfg["fewshot_as_multiturn"],
                    task_definitions=eval_cfg["task_definitions"],
                    shared_prefix=eval_cfg.get("shared_prefix", False), items=answers is not None)
    if len(conditions) == 1:
        results = [evaluate(model, tokenizer, tasks, suite, conditions[0], **settings)]
    else:
        results = evaluate_conditions(model, tokenizer, tasks, suite, conditions, **settings)
    if answers is not None:
        for r, c, f in zip(results, conditions, fields):
            named = {**f, "intervention": label(c)}
            answers.append(r.answers.assign(**named)[[*named, *COLUMNS]])
    return [tidy(r, eval_cfg["num_fewshot"], **f, intervention=label(c),
                 config_hash=config_hash([spec, tasks, c, eval_cfg]), **provenance())
            for r, c, f in zip(results, conditions, fields)]


def write_answers(answers: list[pd.DataFrame], path) -> None:
    """The per-question answers ``evaluation_rows`` collected in ``answers``, as one table at ``path``
    (atomically; only the item columns where a job evaluated nothing)."""
    write_csv(pd.concat(answers, ignore_index=True) if answers else pd.DataFrame(columns=COLUMNS), path)
