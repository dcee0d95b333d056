"""lm-eval task configs of the micro tasks: built here, once, for both ways of using them.

* The pipeline calls :func:`task_configs` with the folder the task JSONL files were written to
  (:func:`gna.micro.tasks.write_tasks`) and passes the dicts, whose ``data_files`` are absolute,
  to ``lm_eval.simple_evaluate(tasks=[...], task_manager=TaskManager(include_defaults=False))``.
* ``workflow/tasks/*.yaml`` are *generated* from the same dicts by :func:`write_task_yamls` (with
  the data folder ``data/micro/tasks``, relative: lm-eval resolves it against the working
  directory, so those YAMLs work from the repository root only). A test checks the files on
  disk equal what the function writes, so there are no two hand-maintained copies.
* The ``micro_knowledge`` group needs the tasks indexed by name: :func:`micro_task_manager`
  writes the YAMLs with absolute paths to a temporary folder and returns a ``TaskManager`` over it.

Metrics follow the lm-eval tasks they stand for: multiple choice ``acc``/``acc_norm``;
``micro_lambada`` like ``lambada_openai`` (log-likelihood of the last word: ``perplexity`` and
``acc``); generation tasks greedy with ``until: ["\\n"]`` and a few tokens, scored by
``exact_match`` after stripping white space, plus ``contains`` (SWDE-style: the answer occurs
among the generated words) or ``answer_match`` (GSM8K-style flexible extraction: the last
number generated equals the answer).
"""
from __future__ import annotations

import copy
import json
import os
import re
import types
from pathlib import Path
from typing import Any

from ..io import write_text
from .tasks import KNOWLEDGE_TASKS, TASKS
from .world import WorldConfig

DEFAULT_DATA_DIR = "data/micro/tasks"      # relative to the repository root (the YAMLs' view)
GROUP = "micro_knowledge"
VERSION = 1.0


# ---------------------------------------------------------------- metrics (callables)

def contains(references: list[str], predictions: list[str], **_: Any) -> float:
    """1.0 if the reference (one word) is among the words of the prediction (SWDE's metric)."""
    return float(references[0].strip() in predictions[0].split())


_NUMBER = re.compile(r"\d+")


def answer_match(references: list[str], predictions: list[str], **_: Any) -> float:
    """1.0 if the last number of the prediction equals the last number of the reference."""
    ref = _NUMBER.findall(references[0])
    pred = _NUMBER.findall(predictions[0])
    return float(bool(ref) and bool(pred) and ref[-1] == pred[-1])


# ---------------------------------------------------------------- configs

def _world_config(data_dir: str | os.PathLike) -> WorldConfig:
    p = Path(data_dir) / "world.json"
    if p.is_file():
        return WorldConfig.from_dict(json.loads(p.read_text())["config"])
    return WorldConfig()


def _base(name: str, data_dir: str) -> dict[str, Any]:
    return {"task": name, "dataset_path": "json",
            "dataset_kwargs": {"data_files": {"test": f"{data_dir}/{name}.jsonl"}},
            "test_split": "test", "metadata": {"version": VERSION}}


_ACC = [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}]
_EXACT = {"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}
_STRIP = [{"name": "strict-match", "filter": [{"function": "remove_whitespace"}, {"function": "take_first"}]}]


def _mc(name: str, data_dir: str) -> dict[str, Any]:
    return {**_base(name, data_dir), "output_type": "multiple_choice", "doc_to_text": "prompt",
            "doc_to_choice": "choices", "doc_to_target": "answer", "target_delimiter": "",
            "metric_list": _ACC}


def _gen(name: str, data_dir: str, max_gen_toks: int, metrics: list, filters: list) -> dict[str, Any]:
    return {**_base(name, data_dir), "output_type": "generate_until", "doc_to_text": "prompt",
            "doc_to_target": "target", "target_delimiter": "",
            "generation_kwargs": {"until": ["\n"], "max_gen_toks": max_gen_toks, "do_sample": False},
            "filter_list": filters, "metric_list": metrics}


def _configs(data_dir: str, world: WorldConfig) -> dict[str, dict[str, Any]]:
    c: dict[str, dict[str, Any]] = {}
    for name in ("micro_knowledge_cloze", "micro_knowledge_statement", "micro_mmlu", "micro_kv",
                 "micro_arc_regular"):
        c[name] = _mc(name, data_dir)
    c["micro_mmlu"]["metric_list"] = _ACC[:1]
    c["micro_kv"]["metric_list"] = _ACC[:1]
    # Winogrande-style: the options are in the contexts, the scored continuation is shared.
    c["micro_knowledge_fill"] = {**_base("micro_knowledge_fill", data_dir), "output_type": "multiple_choice",
                                 "doc_to_text": "answer", "doc_to_choice": "contexts",
                                 "doc_to_target": "target", "target_delimiter": "", "metric_list": _ACC[:1]}
    c["micro_lambada"] = {**_base("micro_lambada", data_dir), "output_type": "loglikelihood",
                          "doc_to_text": "prompt", "doc_to_target": "target", "target_delimiter": "",
                          "metric_list": [{"metric": "perplexity", "aggregation": "perplexity",
                                           "higher_is_better": False},
                                          {"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
    c["micro_swde"] = _gen("micro_swde", data_dir, 4, [_EXACT, {"metric": contains, "aggregation": "mean",
                                                              "higher_is_better": True}], _STRIP)
    c["micro_chain"] = _gen("micro_chain", data_dir, world.chain_depth + 2,
                            [_EXACT, {"metric": answer_match, "aggregation": "mean", "higher_is_better": True}],
                            _STRIP)
    c["micro_arc_chat"] = _gen("micro_arc_chat", data_dir, 2, [_EXACT],
                               [{"name": "letter", "filter": [
                                   {"function": "regex", "regex_pattern": r"\b([A-Z])\b"},
                                   {"function": "take_first"}]}])
    return {name: copy.deepcopy(c[name]) for name in TASKS}


def task_configs(data_dir: str | os.PathLike, tasks: list[str] | None = None) -> list[dict[str, Any]]:
    """lm-eval task dicts of the micro tasks reading ``<data_dir>/<task>.jsonl`` (made absolute).

    ``data_dir`` is the folder :func:`gna.micro.tasks.write_tasks` wrote; its ``world.json``
    (if present) supplies the world config (e.g. the chain depth, for the generation length).
    """
    d = Path(data_dir).expanduser().resolve()
    configs = _configs(str(d), _world_config(d))
    wanted = list(tasks) if tasks is not None else list(TASKS)
    unknown = sorted(set(wanted) - set(configs))
    if unknown:
        raise ValueError(f"unknown micro task(s) {unknown}; known: {', '.join(TASKS)}")
    return [configs[t] for t in wanted]


def micro_task_manager(data_dir: str | os.PathLike, yaml_dir: str | os.PathLike | None = None):
    """A ``TaskManager(include_defaults=False)`` that knows every micro task *and* the
    ``micro_knowledge`` group (plain mean of ``acc`` over the knowledge formats), reading
    ``<data_dir>/<task>.jsonl`` by absolute path: it writes the task YAMLs with absolute paths
    into ``yaml_dir`` (a new temporary folder by default) and indexes that folder.

    Use it to evaluate the group by name (``tasks=["micro_knowledge", "micro_kv", ...]``).
    lm-eval 0.4.13 cannot take a group as an inline dict (it passes the group's own keys on to
    its tasks' configs), hence the files.
    """
    import tempfile

    from lm_eval.tasks import TaskManager

    d = Path(data_dir).expanduser().resolve()
    y = Path(yaml_dir) if yaml_dir is not None else Path(tempfile.mkdtemp(prefix="gna-micro-tasks-"))
    write_task_yamls(y, str(d), _world_config(d))
    return TaskManager(include_path=str(y), include_defaults=False)


# ---------------------------------------------------------------- YAML files

class _Dumper(__import__("yaml").SafeDumper):
    def ignore_aliases(self, data):  # shared sub-dicts are written out in full, no &anchors
        return True


def _represent_function(dumper, fn):
    module = fn.__module__ if fn.__module__ != "__main__" else __spec__.name if __spec__ else __name__
    return dumper.represent_scalar("!function", f"{module}.{fn.__name__}")


def _represent_str(dumper, s):
    # newlines as "\n" in double quotes, not YAML's folded blank-line form
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style='"' if "\n" in s else None)


_Dumper.add_representer(types.FunctionType, _represent_function)
_Dumper.add_representer(str, _represent_str)

_HEADER = ("# Generated by gna.micro.lm_eval_tasks.write_task_yamls: do not edit by hand.\n"
           "# data_files is relative to the WORKING DIRECTORY (lm-eval does not resolve it against\n"
           "# this file's folder): use from the repository root, e.g.\n"
           "#   lm_eval --include_path workflow/tasks --tasks {name} ...\n"
           "# The pipeline instead passes gna.micro.lm_eval_tasks.task_configs(<data dir>) (absolute paths).\n")


def task_yaml_texts(data_dir: str = DEFAULT_DATA_DIR, world: WorldConfig | None = None) -> dict[str, str]:
    """``{file name: YAML text}`` of every task and of the ``micro_knowledge`` group."""
    import yaml
    out = {}
    for cfg in _configs(data_dir, world or WorldConfig()).values():
        body = yaml.dump(cfg, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
        out[f"{cfg['task']}.yaml"] = _HEADER.format(name=cfg["task"]) + body
    group = {"group": GROUP, "task": list(KNOWLEDGE_TASKS),
             "aggregate_metric_list": [{"metric": "acc", "aggregation": "mean", "weight_by_size": False}],
             "metadata": {"version": VERSION}}
    out[f"{GROUP}.yaml"] = _HEADER.format(name=GROUP) + yaml.dump(group, Dumper=_Dumper, sort_keys=False)
    return out


def write_task_yamls(out_dir: str | os.PathLike = "workflow/tasks", data_dir: str = DEFAULT_DATA_DIR,
                     world: WorldConfig | None = None) -> list[str]:
    """(Re)write the YAML files of :func:`task_yaml_texts` into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in task_yaml_texts(data_dir, world).items():
        paths.append(str(write_text(text, out / name)))
    return paths


if __name__ == "__main__":  # python -m gna.micro.lm_eval_tasks [out_dir]
    import sys
    for p in write_task_yamls(*(sys.argv[1:2] or ["workflow/tasks"])):
        print(p)
