"""BBH (lm-eval's ``bbh``, chain of thought at 0 shots) from the pinned BIG-bench 1.0.0 task files.

BBH's items are BIG-bench items that Suzgun et al. rewrote per subtask (options listed as
``Options:\n(A) ...``, targets ``(A)``, ``Yes``, ``valid``, a number) and sampled to 250. Neither
package holds BBH's files, so each subtask's items are rebuilt here from BIG-bench's ``task.json``
by a formatter per subtask (``FORMATS``). A formatter is kept only where BBH's own text checks it:
lm-eval's chain-of-thought exemplars (``fewshot_config.samples`` of
``lm_eval/tasks/bbh/cot_fewshot/<subtask>.yaml``) are BBH items, and for 12 subtasks each of the
three is, string for string, the formatted text of one BIG-bench item (``tests/test_local_bbh.py``).
The tracking tasks of five and seven objects share the three-object one's generator and text, and
object counting's question is BIG-bench's as it stands (its target in digits, as BBH's exemplars
answer). The exemplar items are not BBH test items: they are dropped (``FORMATS``' positions), which
gives back BBH's counts for the three subtasks BBH keeps whole (causal_judgement 187,
penguins_in_a_table 146, snarks 178). The others draw 250 items seeded (BBH's draw is not
rebuildable).

Left out (docs/benchmarks.md): the three subtasks BIG-bench ships as generator code only; those
whose options BBH reordered (date_understanding, temporal_sequences: BIG-bench lists the gold
first) or rewrote (movie_recommendation, reasoning_about_colored_objects); those whose exemplars
BBH rewrote from BIG-bench's (logical_deduction, sports_understanding); and geometric_shapes, where
BIG-bench marks several options right in some items.

Each subtask is lm-eval's ``bbh_cot_fewshot_<subtask>`` (its template, description, generation
settings, ``get-answer`` filter and ``exact_match``, copied below) over the rebuilt documents
``{input, target}``, named with ``_local`` appended; the group ``bbh_local`` averages their
``exact_match`` under ``get-answer`` weighted by size, as lm-eval's ``bbh`` does over its 27.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

GROUP = "bbh_local"
BBH_SUBTASKS = 27
SIZE = 250
_PREFIX, _SUFFIX = "bbh_cot_fewshot_", "_local"
_BB = "bigbench-1.0.0/bigbench/benchmark_tasks/"


def _gold(e: dict) -> str:
    (g,) = [k for k, v in e["target_scores"].items() if v == 1]
    return g


def _options(opts: list[str]) -> str:
    return "\nOptions:\n" + "\n".join(f"({chr(ord('A') + i)}) {o}" for i, o in enumerate(opts))


def _letter(opts: list[str], gold: str) -> str:
    return f"({chr(ord('A') + opts.index(gold))})"


def _causal(e: dict, task: dict) -> tuple[str, str]:
    # BIG-bench's prefix ends in a blank line, BBH's question follows on the next line
    return task["task_prefix"].rstrip("\n") + "\n" + e["input"] + "\nOptions:\n- Yes\n- No", _gold(e)


def _fallacies(e: dict, task: dict) -> tuple[str, str]:
    return e["input"].replace('"\n Is the', '"\nIs the') + "\nOptions:\n- valid\n- invalid", _gold(e)


_HYPERBATON = re.compile(r'Which sentence has the correct adjective order: a " (.*) " b " (.*) " \?', re.S)


def _hyperbaton(e: dict, task: dict) -> tuple[str, str]:
    m = _HYPERBATON.fullmatch(e["input"])
    opts = [m[1], m[2]]
    return "Which sentence has the correct adjective order:" + _options(opts), _letter(opts, m[1 + "ab".index(_gold(e))])


def _counting(e: dict, task: dict) -> tuple[str, str]:
    word, digits = e["target"]  # BBH's targets are the digits
    return e["input"], digits


def _penguins(e: dict, task: dict) -> tuple[str, str]:
    # BBH joins the table's lines with spaces; the question's own lines are kept
    opts = list(e["target_scores"])
    return (task["task_prefix"].replace("\n", " ") + " " + e["input"].lstrip("\n") + _options(opts),
            _letter(opts, _gold(e)))


_SNARKS = re.compile(r"Which statement is sarcastic\? \(a\) (.*) \(b\) (.*)", re.S)


def _snarks(e: dict, task: dict) -> tuple[str, str]:
    m = _SNARKS.fullmatch(e["input"])
    opts = [m[1].removesuffix("."), m[2].removesuffix(".")]
    return "Which statement is sarcastic?" + _options(opts), {"(a)": "(A)", "(b)": "(B)"}[_gold(e)]


def _tracking(e: dict, task: dict) -> tuple[str, str]:
    opts = [o.removesuffix(".") for o in e["target_scores"]]
    return (e["input"].replace(" \n\n", "\n").rstrip(" ") + _options(opts),
            _letter(opts, _gold(e).removesuffix(".")))


def _mc(e: dict, text: str) -> tuple[str, str]:
    """``text``, then BIG-bench's choices as lettered options in its order; the target the gold's letter."""
    opts = list(e["target_scores"])
    return text + _options(opts), _letter(opts, _gold(e))


def _disambiguation(e: dict, task: dict) -> tuple[str, str]:
    return _mc(e, task["task_prefix"] + "Sentence: " + e["input"])


def _dyck(e: dict, task: dict) -> tuple[str, str]:
    return task["task_prefix"].replace(" \n", " ") + "Input: " + e["input"], _gold(e)


def _navigate(e: dict, task: dict) -> tuple[str, str]:
    return (task["task_prefix"] + " " + e["input"] + "\nOptions:\n- Yes\n- No",
            {"True": "Yes", "False": "No"}[_gold(e)])


def _plain_mc(e: dict, task: dict) -> tuple[str, str]:
    return _mc(e, e["input"])


def _translation(e: dict, task: dict) -> tuple[str, str]:
    # BBH joins the error types' lines with spaces; the source and translation keep theirs
    return _mc(e, task["task_prefix"].replace("\n", " ") + " " + e["input"].rstrip(" "))


def _sorting(e: dict, task: dict) -> tuple[str, str]:
    return task["task_prefix"] + " List: " + e["input"], e["target"]


Formatter = Callable[[dict, dict], "tuple[str, str]"]
# BBH subtask -> (BIG-bench task folder, formatter, the BIG-bench items that are lm-eval's exemplars
# (positions in task.json's examples), lm-eval's description)
_LD = ("A task requiring determining the final positions of a set of objects given their initial positions and a "
       "description of a sequence of swaps.\n\n")
FORMATS: dict[str, tuple[str, Formatter, tuple[int, ...], str]] = {
    "causal_judgement": ("causal_judgment", _causal, (46, 80, 48),
                         "Answer questions about causal attribution.\n\n"),
    "formal_fallacies": ("formal_fallacies_syllogisms_negation", _fallacies, (409, 1824, 10476),
                         "Distinguish deductively valid arguments from formal fallacies.\n\n"),
    "hyperbaton": ("hyperbaton", _hyperbaton, (1639, 7296, 41905), "Order adjectives correctly in English sentences.\n\n"),
    "object_counting": ("object_counting", _counting, (),
                        "Questions that involve enumerating objects and asking the model to count them.\n\n"),
    "penguins_in_a_table": ("penguins_in_a_table", _penguins, (70, 6, 28),
                            "Answer questions about a table of penguins and their attributes.\n\n"),
    "snarks": ("snarks", _snarks, (6, 28, 163),
               "Determine which of two sentences is sarcastic.\n\nAccording to Cambridge University Dictionary, sarcasm "
               "is \"the use of remarks that clearly mean the opposite of what they say, made in order to hurt someone's "
               "feelings or to criticize something in a humorous way.\" Sarcastic sentences often contain satirical or "
               "ironic utterances, hyperboles, ambivalent or witty remarks.\n\n"),
    "disambiguation_qa": ("disambiguation_qa", _disambiguation, (140, 12, 57),
                          "Clarify the meaning of sentences with ambiguous pronouns.\n\n"),
    "dyck_languages": ("dyck_languages", _dyck, (46, 906, 669), "Correctly close a Dyck-n word.\n\n"),
    "navigate": ("navigate", _navigate, (25, 114, 654),
                 "Given a series of navigation instructions, determine whether one would end up back at the starting "
                 "point.\n\n"),
    "ruin_names": ("ruin_names", _plain_mc, (12, 57, 327),
                   "Select the humorous edit that 'ruins' the input movie or musical artist name.\n\n"),
    "salient_translation_error_detection": ("salient_translation_error_detection", _translation, (25, 114, 654),
                                            "Detect the type of error in an English translation of a German source "
                                            "sentence.\n\n"),
    "word_sorting": ("word_sorting", _sorting, (198, 234, 542), "Sort a list of words.\n\n"),
    "tracking_shuffled_objects_three_objects": ("tracking_shuffled_objects/three_objects", _tracking, (25, 114, 654), _LD),
    "tracking_shuffled_objects_five_objects": ("tracking_shuffled_objects/five_objects", _tracking, (), _LD),
    "tracking_shuffled_objects_seven_objects": ("tracking_shuffled_objects/seven_objects", _tracking, (), _LD),
}
SUBTASKS = tuple(FORMATS)


def task_name(subtask: str) -> str:
    return _PREFIX + subtask + _SUFFIX


def result_name(subtask: str) -> str:
    """The subtask's name in lm-eval's results: a group's inline task is named ``<group>::<task>``."""
    return f"{GROUP}::{task_name(subtask)}"


def member(subtask: str) -> str:
    """The subtask's BIG-bench file, as the ``bigbench`` archive's member."""
    return f"{_BB}{FORMATS[subtask][0]}/task.json"


def read_documents(subtask: str, root: str | Path) -> tuple[list[dict], int]:
    """The subtask's BBH-formatted documents ``{input, target}`` from BIG-bench's file under ``root``
    (the lm-eval exemplars dropped, BIG-bench's order kept), and how many items the file holds."""
    folder, fmt, exemplars, _ = FORMATS[subtask]
    path = Path(root) / member(subtask)
    if not path.is_file():
        raise ConfigError(f"bbh {subtask}: {str(path)!r} does not exist (fetch the bigbench archive first: "
                          "snakemake external_inputs)")
    task = json.loads(path.read_text(encoding="utf-8"))
    examples = task["examples"]
    docs = []
    for i, e in enumerate(examples):
        if i in exemplars:
            continue
        try:
            text, target = fmt(e, task)
        except (TypeError, ValueError, KeyError):
            raise ConfigError(f"bbh {subtask}: item {i} of {str(path)!r} is not in the form its formatter "
                              "reads") from None
        docs.append({"input": text, "target": target})
    return docs, len(examples)


def sample(docs: list[dict], subtask: str, seed: int, size: int | None = SIZE) -> list[dict]:
    """BBH's size (250, or all where fewer), drawn by a generator seeded with ``seed`` and the
    subtask, in file order; ``size`` below 250 draws fewer."""
    n = min(SIZE, size if size is not None else SIZE)
    if n >= len(docs):
        return list(docs)
    return [docs[i] for i in sorted(random.Random(f"bbh_{subtask}:{seed}").sample(range(len(docs)), n))]


# lm-eval 0.4.13's lm_eval/tasks/bbh/cot_fewshot/_cot_fewshot_template_yaml, less the dataset and the
# exemplars (a 0-shot prompt has none); the group is _bbh.yaml's aggregation.
TEMPLATE: dict[str, Any] = {
    "output_type": "generate_until", "doc_to_text": "Q: {{input}}\nA: Let's think step by step.\n",
    "doc_to_target": "{{target}}", "target_delimiter": "",
    "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
    "generation_kwargs": {"max_gen_toks": 1024, "until": ["</s>", "Q", "\n\n"], "do_sample": False, "temperature": 0.0},
    "filter_list": [{"name": "get-answer", "filter": [{"function": "regex",
                                                       "regex_pattern": "(?<=the answer is )(.*)(?=.)"},
                                                      {"function": "take_first"}]}],
}
AGGREGATE = [{"metric": "exact_match", "aggregation": "mean", "weight_by_size": True, "filter_list": "get-answer"}]


def subtask_config(subtask: str, data_file: str) -> dict[str, Any]:
    return {"task": task_name(subtask), "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": data_file}},
            "test_split": "test", **json.loads(json.dumps(TEMPLATE)), "description": FORMATS[subtask][3],
            "metadata": {"version": 4.0}}


def group_config(subtasks: list[str], data_file: Callable[[str], str]) -> dict[str, Any]:
    """The ``bbh_local`` group over the built subtasks (``data_file(subtask)``: its documents)."""
    return {"group": GROUP, "task": [subtask_config(s, data_file(s)) for s in subtasks],
            "aggregate_metric_list": json.loads(json.dumps(AGGREGATE)), "metadata": {"version": 3.0}}
