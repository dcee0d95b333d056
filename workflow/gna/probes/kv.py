"""KV-retrieval probe (paper Fig. 4): a dictionary of ``key -> value`` lines, then a query.

Paper format (the paper's prompt)::

    Memorize the following dictionary:
    apple:42
    ...
    The value of the key 'apple' is

scored as multiple choice over the n values of the dictionary (chance 1/n). Compact format,
for the micro study's word-level models (trained on exactly this)::

    k3 42
    ...
    k3 ?

Unlike the official code (global ``random``, no seed) everything is drawn from one
``random.Random(seed)``: the same seed gives the same probe set on any machine. The values are
distinct numbers drawn by a rule (:mod:`gna.probes.values`): the paper's 0..99, or 10..99 for a
tokenizer that splits numbers into digits (under which "7" would be a prefix of "72").
"""
from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path

from ..errors import ProbeError
from ..io import atomic_open
from .values import DEFAULT_RULE, check_examples, rule_tag, values_of

FORMATS = ("paper", "compact")
SWEEP_N = tuple(range(10, 51, 5))  # the paper's n = 10, 15, ..., 50
PAPER_HEADER = "Memorize the following dictionary:\n"
COMPACT_KEYS = tuple(f"k{i}" for i in range(300))


@lru_cache(maxsize=1)
def english_words() -> tuple[str, ...]:
    """Wonderwords' nouns, verbs and adjectives (what the official ``RandomWord()`` draws from),
    kept if lowercase ASCII letters only, deduplicated and sorted.

    We sample from this list with our own rng: wonderwords' generator is not seedable here.
    """
    from wonderwords import RandomWord

    lists = RandomWord(enhanced_prefixes=False).parts_of_speech  # {"noun": [...], ...}
    words = {w for pos in ("noun", "verb", "adjective") for w in lists[pos]}
    return tuple(sorted(w for w in words if w.isascii() and w.isalpha() and w.islower()))


def generate_kv_probe(n_pairs: int, n_examples: int, seed: int, separator: str = " ",
                      fmt: str = "paper", key_pool=None, values: str = DEFAULT_RULE) -> list[dict]:
    """``n_examples`` KV-retrieval examples with ``n_pairs`` pairs each; same seed, same list.

    Each example: ``{"id", "fmt", "n_pairs", "seed", "prompt", "choices", "answer", "query"}``;
    ``choices[i] = separator + str(value_i)`` in dictionary order, ``answer`` indexes the
    query's value. Keys come from ``key_pool`` (default: English words for "paper",
    ``k0..k299`` for "compact").

    ``separator`` sits between the prompt and the value. The official code uses "" ("...is42").
    Our default is " ", the way a number follows "is" in ordinary text: a GPT-2/GPT-NeoX BPE
    (Mamba's tokenizer) encodes " 42" as one token, the natural continuation, while "is42" is
    text a model has rarely seen. Llama-3's pre-tokenizer splits every number from the space
    before it, so there " 42" is two tokens (" ", "42"): the shared " " adds the same log-prob to
    every choice and does not change the ranking (and the scorer still needs one row per
    example, see ``gna.probes.scoring``). Pass ``separator=""`` to copy the official code.

    ``values`` names the numbers drawn from (:mod:`gna.probes.values`): "0-99" (the paper's; these
    examples are as they always were) or "10-99" (two digits each, for tokenizers that split numbers
    into digits: ids and the ``values`` field name the rule).
    """
    if fmt not in FORMATS:
        raise ProbeError(f"probe format {fmt!r} is not one of {FORMATS}")
    drawn = values_of(values)
    if not 1 <= n_pairs <= len(drawn):
        raise ProbeError(f"n_pairs={n_pairs} outside 1..{len(drawn)}: values are distinct numbers {values}")
    if n_examples < 0:
        raise ProbeError(f"n_examples={n_examples} is negative")
    if key_pool is None:
        pool = list(english_words() if fmt == "paper" else COMPACT_KEYS)
    else:
        pool = list(dict.fromkeys(key_pool))  # dedupe, keep order (sampling depends on order)
    if len(pool) < n_pairs:
        raise ProbeError(f"key pool has {len(pool)} distinct keys, fewer than n_pairs={n_pairs}")

    rng = random.Random(seed)
    tag, extra = rule_tag(values), ({} if values == DEFAULT_RULE else {"values": values})
    examples = []
    for i in range(n_examples):
        keys = rng.sample(pool, n_pairs)
        vals = rng.sample(drawn, n_pairs)
        q = rng.randrange(n_pairs)
        if fmt == "paper":
            prompt = (PAPER_HEADER + "\n".join(f"{k}:{v}" for k, v in zip(keys, vals))
                      + f"\nThe value of the key '{keys[q]}' is")
        else:
            prompt = "\n".join(f"{k} {v}" for k, v in zip(keys, vals)) + f"\n{keys[q]} ?"
        examples.append({"id": f"kv-{fmt}-n{n_pairs}-s{seed}{tag}-{i}", "fmt": fmt, "n_pairs": n_pairs,
                         "seed": seed, "prompt": prompt, "choices": [separator + str(v) for v in vals],
                         "answer": q, "query": keys[q], **extra})
    return examples


def sweep_seed(seed: int, n_pairs: int) -> int:
    """The seed of one n in a sweep: distinct per (seed, n), since n <= 100 < 1000."""
    return seed * 1000 + n_pairs


def sweep(n_values=SWEEP_N, n_examples: int = 1000, seed: int = 0, **kwargs) -> dict[int, list[dict]]:
    """``{n: generate_kv_probe(n, n_examples, sweep_seed(seed, n), **kwargs)}`` for the paper's
    n = 10, 15, ..., 50. Each n gets its own seed so the sets are independent draws."""
    return {n: generate_kv_probe(n, n_examples, sweep_seed(seed, n), **kwargs) for n in n_values}


def _jsonl_line(ex: dict) -> str:
    return json.dumps(ex, ensure_ascii=False) + "\n"


def write_jsonl(examples, path) -> Path:
    """One JSON object per line, written atomically (see :mod:`gna.io`)."""
    with atomic_open(path) as f:
        for ex in examples:
            f.write(_jsonl_line(ex))
    return Path(path)


def probe_sha256(examples) -> str:
    """The sha256 of the probe file :func:`write_jsonl` writes for ``examples`` (``gna.io.sha256_file``
    of that file): the name of the exact prompts a ranking came from."""
    import hashlib

    h = hashlib.sha256()
    for ex in examples:
        h.update(_jsonl_line(ex).encode("utf-8"))
    return h.hexdigest()


REQUIRED_KEYS = ("id", "prompt", "choices", "answer")


def read_jsonl(path) -> list[dict]:
    """The examples of a JSONL probe file; ProbeError naming the file (and line) if it is
    missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise ProbeError(f"probe file {str(path)!r} does not exist")
    examples = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                ex = json.loads(line)
            except json.JSONDecodeError as e:
                raise ProbeError(f"probe file {str(path)!r} line {lineno}: not valid JSON ({e})") from None
            if not isinstance(ex, dict) or any(k not in ex for k in REQUIRED_KEYS):
                raise ProbeError(f"probe file {str(path)!r} line {lineno}: not an object with keys {REQUIRED_KEYS}")
            if not (isinstance(ex["choices"], list) and all(isinstance(c, str) for c in ex["choices"])
                    and isinstance(ex["answer"], int) and 0 <= ex["answer"] < len(ex["choices"])):
                raise ProbeError(f"probe file {str(path)!r} line {lineno}: 'choices' must be a list of strings and "
                                 "'answer' the index of the right one")
            examples.append(ex)
    return examples


def lm_eval_task_config(jsonl_path, task_name: str, tokenizer=None) -> dict:
    """An lm-eval ``multiple_choice`` task over a probe JSONL, to pass in ``tasks=[...]``.

    The path is made absolute (lm-eval resolves relative ``data_files`` against the working
    directory). ``target_delimiter`` is "" because the separator is already inside the choices.
    The prompt, choices and answer are the examples' fields, named (lm-eval reads a named field
    as it is); a Jinja template of each (``"{{prompt}}"``) gives the same requests but is compiled
    again for every example, a third of a micro model's evaluation time.

    With the model's ``tokenizer``, a probe whose values it encodes so that one is a prefix of another
    (:mod:`gna.probes.values`) is refused here too.
    """
    path = Path(jsonl_path).resolve()
    examples = read_jsonl(path)  # a missing or malformed file is refused here, naming it, not deep inside lm-eval
    if tokenizer is not None:
        check_examples(examples, tokenizer, name=str(jsonl_path))
    return {
        "task": task_name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(path)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "prompt",
        "doc_to_choice": "choices",
        "doc_to_target": "answer",
        "target_delimiter": "",
        "num_fewshot": 0,
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
    }


# An evaluation job's lm-eval task name of a KV probe set: ``kv_n<pairs>_s<seed>`` (Fig. 4, top-k's
# control: several seeds in one job) or ``kv_n<pairs>`` (the baselines: one probe set per job).
TASK_PREFIX = "kv_n"
_TASK_NAME = re.compile(rf"^{TASK_PREFIX}(\d+)(?:_s(\d+))?$")


def probe_task_name(n_pairs: int, seed: int | None = None) -> str:
    """The lm-eval task name of the probe set of ``n_pairs`` pairs drawn with ``seed`` (None: unnamed)."""
    return f"{TASK_PREFIX}{int(n_pairs)}" + ("" if seed is None else f"_s{int(seed)}")


def is_probe_task(name: str) -> bool:
    """Whether ``name`` is a task name :func:`probe_task_name` gives."""
    return _TASK_NAME.match(str(name)) is not None


def parse_probe_task(name: str) -> tuple[int, int | None]:
    """``(n_pairs, seed)`` of a name :func:`probe_task_name` gave (seed None where it names none)."""
    m = _TASK_NAME.match(str(name))
    if m is None:
        raise ValueError(f"{name!r} is not a KV probe's task name "
                         f"({TASK_PREFIX}<pairs> or {TASK_PREFIX}<pairs>_s<seed>)")
    return int(m[1]), None if m[2] is None else int(m[2])


def probe_suite(probes, tokenizer=None) -> dict[str, dict]:
    """``{task name: lm_eval_task_config(...)}`` of ``probes``, each ``(n_pairs, seed, path)`` (seed None:
    a ``kv_n<pairs>`` name), in order: the ``extra`` tasks of a :class:`gna.evaluation.lm_eval_bridge.TaskSuite`.
    With the model's ``tokenizer``, a probe whose values it makes prefixes of each other is refused here,
    before lm-eval runs."""
    suite = {}
    for n_pairs, seed, path in probes:
        name = probe_task_name(n_pairs, seed)
        if name in suite:
            raise ValueError(f"KV probe {name} is given twice")
        suite[name] = lm_eval_task_config(path, name, tokenizer=tokenizer)
    return suite
