"""The bridge to lm-eval: evaluate an in-memory model, interventions applied, into tidy rows.

Interventions come as plain data (from the config or a rule; their vocabulary is
:mod:`gna.interventions.vocabulary`), applied around
``lm_eval.simple_evaluate(HFLM(pretrained=<model object>))``.

Few-shot: ``num_fewshot`` is passed to lm-eval explicitly, 0 unless a task is given another
number, as the official ``run_eval`` does (left out, lm-eval 0.4 runs gsm8k 5-shot and bbh 3-shot
with chain of thought). Every result row records it. A metric reported under several filters
(gsm8k: ``strict-match`` and ``flexible-extract``) gives one row per filter, never one merged key.

lm-eval's defaults are never left to the installed version: ``add_bos_token``,
``fewshot_as_multiturn``, ``max_length`` and the task definitions are passed (the official code's
0.4.7 values: :mod:`gna.evaluation.lm_eval_047`), and every row records what ran: whether requests began with
a BOS, the effective max length, the multiturn flag, the task definitions and each task's version.
Log-probs are computed in float32 (``softmax_dtype``), whatever the model's dtype.

Rows of a metric that is a mean of 0/1 over the questions of a task with a fixed sample (the local
MMLU tasks, :mod:`gna.evaluation.local_mmlu`, and the tasks from the pinned benchmark files,
:mod:`gna.evaluation.local_suite`) also carry ``n`` and a 95% Clopper-Pearson interval
(``ci_low``, ``ci_high``; :mod:`gna.evaluation.binomial`).

With ``items=True`` an evaluation also keeps each question's answer (lm-eval's logged samples, read
into :mod:`gna.evaluation.items`' table after each ``simple_evaluate`` call), for paired comparisons of two conditions
scored on the same questions (:mod:`gna.evaluation.paired`).
"""
from __future__ import annotations

import functools
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd
from torch import nn

from ..errors import ConfigError
from ..interventions.vocabulary import applied
from ..resume.store import section
from . import local_mmlu, local_suite
from .binomial import accuracy_interval
from .items import item_rows
from .lm_eval_047 import INSTALLED, check_fewshot, task_config
from .resume_requests import keeping_finished

log = logging.getLogger(__name__)


class TaskSuite:
    """Resolves task names to what lm-eval takes: the micro tasks as dicts over local JSONL
    (``micro_data`` set), the local MMLU tasks over the sample ``local_mmlu_dir`` names (a folder
    :func:`gna.evaluation.local_mmlu.build` wrote), lm-eval's registered tasks (paper scale), or
    ``extra`` task dicts (e.g. a KV probe's, from :func:`gna.probes.kv.lm_eval_task_config`), and the
    tasks built from the pinned benchmark files (``<lm-eval task>_local``) in ``local_suite_dir`` (a
    folder :func:`gna.evaluation.local_suite.build` wrote)."""

    def __init__(self, micro_data: str | None = None, extra: dict[str, dict] | None = None,
                 local_mmlu_dir: str | None = None, local_suite_dir: str | None = None):
        self.micro_data, self.extra = micro_data, dict(extra or {})
        # a sample written in random order (the confirmation's fresh questions): its first n are a
        # simple random sample, so a limit on it is no subset of subjects
        self.mmlu_random_order = local_mmlu_dir is not None and local_mmlu.in_random_order(local_mmlu_dir)
        if micro_data is not None and not (Path(micro_data) / "micro_mmlu.jsonl").is_file():
            raise ConfigError(f"micro task data {micro_data!r} is missing (expected micro_mmlu.jsonl there)")
        if local_mmlu_dir is not None:
            self.extra.update({c["task"]: c for c in local_mmlu.task_configs(local_mmlu_dir)})
        if local_suite_dir is not None:
            self.extra.update({c["group"] if "group" in c else c["task"]: c
                               for c in local_suite.task_configs(local_suite_dir)})

    def resolve(self, names: list[str]):
        from lm_eval.tasks import TaskManager

        local = [self.extra[n] for n in names if n in self.extra]
        rest = [n for n in names if n not in self.extra]
        stray = sorted(set(rest) & set(local_mmlu.TASKS))
        if stray:
            raise ConfigError(f"task(s) {stray} read the local MMLU sample: build it (rule local_mmlu) and "
                              "pass its folder")
        stray = sorted(set(rest) & set(local_suite.TASKS))
        if stray:
            raise ConfigError(f"task(s) {stray} read the pinned benchmark files: build them (rule local_suite, "
                              "benchmarks.suite) and pass their folder")
        if self.micro_data is not None and rest:
            from ..micro.lm_eval_tasks import task_configs
            local, rest = local + task_configs(self.micro_data, rest), []
        # Indexing lm-eval's ~14,700 built-in tasks costs ~10 s: only when they are needed.
        manager = TaskManager(include_defaults=bool(rest))
        return [_group(c, manager) if "group" in c else c for c in local] + rest, manager


def _group(config: dict, manager):
    """lm-eval's group of a group dict (its tasks inline dicts, named ``<group>::<task>``). Built here:
    lm-eval 0.4.13 hands a group dict passed as a task its own keys as overrides of each of its tasks,
    which no task takes (``group``)."""
    from lm_eval.tasks._index import TaskIndex

    return manager._factory.build(TaskIndex.entry_from_config(config), overrides=None, registry=manager._index)


def fewshot_of(task: str, num_fewshot: int | dict | None) -> int:
    """The few-shot count of ``task``: ``num_fewshot`` as a number, or ``{task: n}`` (others 0)."""
    if isinstance(num_fewshot, dict):
        return int(num_fewshot.get(task, 0))
    return int(num_fewshot or 0)


class Scores(dict):
    """``{task: {(metric, filter): value}}``, with what produced them: ``versions`` ``{task: version}``
    (lm-eval's, of the definition that ran), ``settings`` (the lm-eval settings every row records),
    ``sizes`` ``{task: questions scored}`` and ``answers`` (each question's answer and score, a
    :func:`gna.evaluation.items.item_rows` table; None unless asked for)."""

    def __init__(self, scores=(), versions=None, settings=None, sizes=None, answers=None):
        super().__init__(scores)
        self.versions, self.settings = dict(versions or {}), dict(settings or {})
        self.sizes, self.answers = dict(sizes or {}), answers


def _check_tasks(tasks: list[str], limit, num_fewshot, task_definitions: str, random_order: bool = False) -> None:
    """Refuse, before any model runs, what the tasks' files cannot give: shots a pinned task has no
    exemplars for, a ``limit`` on the stratified local MMLU sample (it would keep a few subjects)."""
    check_fewshot(tasks, task_definitions, lambda t: fewshot_of(t, num_fewshot))
    shots = [t for t in tasks if t in local_suite.TASKS and fewshot_of(t, num_fewshot)]
    if shots:
        raise ConfigError(f"eval.num_fewshot gives {shots[0]!r} {fewshot_of(shots[0], num_fewshot)} shots: the "
                          "pinned files hold its evaluation split only, no exemplars (0 shots, the paper's setting)")
    if limit is not None and set(tasks) & set(local_mmlu.TASKS) and not random_order:
        raise ConfigError(f"eval.limit = {limit} would score the first questions of the local MMLU sample, a few "
                          "subjects only: set benchmarks.mmlu.size instead")


def _lm(model: nn.Module, tokenizer, lm_class: type | None, shared_prefix: bool, partial, **settings):
    """lm-eval's ``HFLM`` on ``model`` (``lm_class`` instead where given; each context once with
    ``shared_prefix``), encoding each request once, keeping finished units in ``partial`` where a
    resuming job has one."""
    import torch
    from lm_eval.models.huggingface import HFLM

    from .shared_prefix import sharing_contexts

    lm_class = encoding_once(lm_class or (sharing_contexts(HFLM) if shared_prefix else HFLM))
    lm = (keeping_finished(lm_class) if partial is not None else lm_class)(
        pretrained=model, tokenizer=tokenizer, softmax_dtype=torch.float32, **settings)
    if partial is not None:
        lm.partial = partial
    return lm


def _add_results(out: Scores, res: dict) -> None:
    """One ``simple_evaluate`` result's versions, sample sizes and metrics into ``out`` (stderr dropped)."""
    out.versions.update(res.get("versions", {}))
    for task, metrics in res["results"].items():
        if isinstance(metrics.get("sample_len"), int):
            out.sizes[task] = metrics["sample_len"]
        out[task] = {_metric_key(k): float(v) for k, v in metrics.items()
                     if "stderr" not in k and k not in ("alias", "sample_len") and isinstance(v, (int, float))}


def evaluate(model: nn.Module, tokenizer, tasks: list[str], suite: TaskSuite, interventions=(),
             batch_size: int = 32, max_length: int | None = 2048, limit: int | None = None,
             chat_tasks: tuple[str, ...] = (), num_fewshot: int | dict | None = 0,
             add_bos_token: bool | None = None, fewshot_as_multiturn: bool = False,
             task_definitions: str = INSTALLED, shared_prefix: bool = False, items: bool = False,
             lm_class: type | None = None) -> Scores:
    """The :class:`Scores` of ``model`` under ``interventions`` (stderr dropped).

    ``add_bos_token``: ``None`` = the tokenizer's default (lm-eval 0.4.13's), ``False`` = 0.4.7's;
    ``max_length``: ``None`` = from the model config (n_positions, max_position_embeddings, n_ctx),
    else the tokenizer's, as lm-eval does. Tasks in ``chat_tasks`` run with the tokenizer's chat
    template (ARC-C "chat"). Tasks run in groups of equal (chat, few-shot), each group one
    ``simple_evaluate`` call. ``shared_prefix``: each distinct context runs once
    (:mod:`.shared_prefix`; the same log-probabilities up to float rounding). ``items``: keep each
    question's answer (``Scores.answers``). ``lm_class``: the ``HFLM`` subclass to evaluate with
    instead (:mod:`.prefix_conditions`' recording and replaying). In a resuming job (every Snakemake
    job: :mod:`gna.resume`) lm-eval's own requests run in units kept as each finishes, and a stopped
    run's units are not run again (:mod:`.resume_requests`); a given ``lm_class`` batches its own way
    and is not resumed by units."""
    from lm_eval import simple_evaluate

    _check_tasks(tasks, limit, num_fewshot, task_definitions, getattr(suite, "mmlu_random_order", False))
    interventions = list(interventions)
    # in a resuming job, the units of requests a stopped run finished (.resume_requests)
    partial = None if lm_class is not None else section(
        "evaluate", tasks, interventions, batch_size, max_length, limit, sorted(chat_tasks), num_fewshot,
        add_bos_token, fewshot_as_multiturn, task_definitions, shared_prefix)
    lm = _lm(model, tokenizer, lm_class, shared_prefix, partial, batch_size=batch_size, max_length=max_length,
             add_bos_token=add_bos_token)
    settings = {"add_bos_token": starts_with_bos(lm, tokenizer), "max_length": int(lm.max_length),
                "fewshot_as_multiturn": fewshot_as_multiturn, "task_definitions": task_definitions}
    groups: dict[tuple[bool, int], list[str]] = {}
    for t in tasks:
        groups.setdefault((t in chat_tasks, fewshot_of(t, num_fewshot)), []).append(t)
    out, answers = Scores(settings=settings), []
    with applied(model, interventions), _without_environment_report():
        for (chat, shots), names in sorted(groups.items()):
            resolved, manager = suite.resolve(names)
            resolved = [task_config(t, task_definitions) if isinstance(t, str) else t for t in resolved]
            res = simple_evaluate(model=lm, tasks=resolved, task_manager=manager, limit=limit, bootstrap_iters=0,
                                  log_samples=items, apply_chat_template=chat, num_fewshot=shots,
                                  fewshot_as_multiturn=fewshot_as_multiturn, verbosity="WARNING")
            _add_results(out, res)
            if items:
                answers += [item_rows(task, samples) for task, samples in res["samples"].items()]
    if items:
        out.answers = pd.concat(answers, ignore_index=True) if answers else item_rows("", [])
    return out


@functools.cache
def encoding_once(base: type) -> type:
    """lm-eval's ``HFLM`` (``base``) encoding each distinct string once per evaluation.

    A multiple-choice request encodes its context once per choice, and again with each
    continuation (``TemplateLM._encode_pair``), and every encoding decodes the BOS token to look
    for it: a KV probe of 12 pairs encodes each prompt 24 times, a quarter of a micro model's
    evaluation. The tokenizer is a pure function of its input, so the ids are the same; each call
    gets its own list, as from the tokenizer."""

    class EncodingOnce(base):
        def tok_encode(self, string, add_special_tokens=None, left_truncate_len=None, **kwargs):
            if kwargs:
                return super().tok_encode(string, add_special_tokens=add_special_tokens,
                                          left_truncate_len=left_truncate_len, **kwargs)
            memo = self.__dict__.setdefault("_gna_encoded", {})
            key = (string, add_special_tokens, left_truncate_len)
            if key not in memo:
                memo[key] = tuple(super().tok_encode(string, add_special_tokens=add_special_tokens,
                                                     left_truncate_len=left_truncate_len))
            return list(memo[key])

    EncodingOnce.__qualname__ = EncodingOnce.__name__ = f"EncodingOnce{base.__name__}"
    return EncodingOnce


def starts_with_bos(lm, tokenizer) -> bool:
    """Does a request ``lm`` encodes begin with the tokenizer's BOS (what ``add_bos_token`` did)?"""
    bos = getattr(tokenizer, "bos_token_id", None)
    return bos is not None and lm.tok_encode("a")[:1] == [bos]


@contextmanager
def _without_environment_report() -> Iterator[None]:
    """``simple_evaluate`` ends by describing the machine (``torch.utils.collect_env`` runs pip,
    conda and nvidia-smi in subprocesses) and the git commit: ~1.5 s per evaluation job here, for
    fields our rows never read (they record package versions and the config hash themselves)."""
    import lm_eval.evaluator as ev

    saved = ev.add_env_info, ev.get_git_commit_hash
    ev.add_env_info, ev.get_git_commit_hash = (lambda results: None), (lambda: None)
    try:
        yield
    finally:
        ev.add_env_info, ev.get_git_commit_hash = saved


def _metric_key(key: str) -> tuple[str, str]:
    """lm-eval's ``"metric,filter"`` -> ``(metric, filter)`` (``"none"`` where it names none)."""
    metric, _, filt = key.partition(",")
    return metric, filt or "none"


def tidy(results: dict[str, dict], num_fewshot: int | dict | None = 0, **fields) -> pd.DataFrame:
    """Long table: one row per (task, metric, filter), its few-shot count, and the constant ``fields``;
    from :class:`Scores`, also each task's version and the lm-eval settings, and for an accuracy of a
    local MMLU task or a task from the pinned files its ``n`` and 95% interval (``ci_low``, ``ci_high``).

    A plain ``{metric: value}`` (no filter) reads as filter ``"none"``."""
    settings, versions = getattr(results, "settings", {}), getattr(results, "versions", None)
    sizes = getattr(results, "sizes", {})
    rows = []
    for t, ms in results.items():
        ran = dict(settings, task_version=str(versions.get(t))) if versions is not None else {}
        for key, v in ms.items():
            metric, filt = key if isinstance(key, tuple) else (key, "none")
            row = dict(fields, task=t, metric=metric, filter=filt, num_fewshot=fewshot_of(t, num_fewshot), **ran,
                       value=v)
            if metric in {**local_mmlu.BINOMIAL_METRICS, **local_suite.BINOMIAL_METRICS}.get(t, ()):
                if t not in sizes:
                    raise ValueError(f"{t} {metric} = {v} has no question count: its interval cannot be given")
                _, row["ci_low"], row["ci_high"] = accuracy_interval(v, sizes[t])
                row["n"] = sizes[t]
            rows.append(row)
    return pd.DataFrame(rows)
