"""The micro study's evaluation tasks: seeded generators -> JSONL files read by lm-eval.

Row schemas (one JSON object per line):

* multiple choice: ``{"id", "task", "prompt", "choices", "answer"}``; ``choices`` are the
  continuations *including* their leading space (lm-eval ``target_delimiter: ""``),
  ``answer`` the gold index.
* multiple choice with the options in the context (Winogrande-style partial scoring, task
  ``micro_knowledge_fill``): ``{"id", "task", "contexts", "target", "answer"}``: the model
  scores ``target`` after each context; ``answer`` indexes ``contexts``.
* generation and log-likelihood: ``{"id", "task", "prompt", "target"}``; for generation the
  target has no leading space (it is compared with the stripped generation), for the
  log-likelihood task (``micro_lambada``) it is the continuation with its leading space.

Every row also carries ``"kind"``: ``knowledge`` (answer only in the weights), ``retrieval``
(answer in the prompt) or ``both`` (MMLU-format: the value is known, the letter is copied).
The formats, one example each (``\\n`` is a newline token):

==========================  =========================================================  =================
task                        prompt                                                     answer
==========================  =========================================================  =================
micro_knowledge_cloze       ``r3 e17``                                                 `` 42`` of 4 values
micro_knowledge_statement   ``r3``                                                     `` e17 42\\n`` of 4 statements
micro_knowledge_fill        contexts ``r3 e17`` / ``r3 e5``                            target `` 42``
micro_mmlu                  ``r3 e17\\nA 8\\nB 42\\nC 3\\nD 77\\nAnswer:``             `` B`` of A-D
micro_kv                    ``k12 5\\nk7 81\\n...\\nk7 ?``                              `` 81`` of the n values
micro_swde                  ``f3 27 f7 81 f1 5\\nf7 ?``                                 generate ``81``
micro_lambada               ``w5 w9 w33 w2 ... w33``                                   `` w2`` (ppl, acc)
micro_chain                 ``x3 x7\\nx12 5\\nx7 42\\nx9 x12\\nx3 ?``                   generate ``x7 42``
micro_arc_regular           ``r3 e17``                                                 `` 42`` of 4 values
micro_arc_chat              ``r3 e17\\nA 8\\nB 42\\nC 3\\nD 77\\nAnswer:``             generate ``B``
==========================  =========================================================  =================

``micro_arc_regular`` and ``micro_arc_chat`` are the *same* questions (same options, same
order) in the two formats of the paper's ARC-C chat-vs-regular experiment.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, Callable, Iterable

from ..io import write_text
from .world import ANSWER, QUERY, World, WorldConfig, build_world

KNOWLEDGE_TASKS = ("micro_knowledge_cloze", "micro_knowledge_statement", "micro_knowledge_fill")
RETRIEVAL_TASKS = ("micro_kv", "micro_swde", "micro_lambada", "micro_chain")
TASKS = (*KNOWLEDGE_TASKS, "micro_mmlu", *RETRIEVAL_TASKS, "micro_arc_regular", "micro_arc_chat")
TASK_KIND = {**{t: "knowledge" for t in KNOWLEDGE_TASKS}, **{t: "retrieval" for t in RETRIEVAL_TASKS},
             "micro_mmlu": "both", "micro_arc_regular": "knowledge", "micro_arc_chat": "both"}
SPLITS = ("test", "val")   # test: the JSONL files lm-eval reads; val: the trainer's evaluation


# --------------------------------------------------------------------------- rendering
# The training corpus renders its segments with the same functions, so formats cannot drift.

def kv_lines(pairs: Iterable[tuple[str, str]]) -> list[str]:
    return [f"{k} {v}" for k, v in pairs]


def kv_prompt(pairs: list[tuple[str, str]], query: str) -> str:
    """The probe's compact format: ``kK V`` lines, then ``kQ ?``."""
    return "\n".join(kv_lines(pairs)) + "\n" + f"{query} {QUERY}"


def fact_prompt(relation: str, entity: str) -> str:
    return f"{relation} {entity}"


def mmlu_prompt(relation: str, entity: str, options: list[str], letters: list[str]) -> str:
    lines = [fact_prompt(relation, entity)] + [f"{l} {o}" for l, o in zip(letters, options)]
    return "\n".join(lines) + "\n" + ANSWER


def record_text(record: list[tuple[str, str]]) -> str:
    return " ".join(f"{f} {v}" for f, v in record)


def swde_prompt(record: list[tuple[str, str]], field: str) -> str:
    return record_text(record) + "\n" + f"{field} {QUERY}"


def chain_lines(chains: list[list[str]]) -> list[tuple[str, str]]:
    """A chain ``[x3, x7, 42]`` is the lines ``x3 x7`` and ``x7 42``."""
    return [(c[i], c[i + 1]) for c in chains for i in range(len(c) - 1)]


def chain_prompt(lines: list[tuple[str, str]], head: str) -> str:
    return "\n".join(f"{a} {b}" for a, b in lines) + "\n" + f"{head} {QUERY}"


# --------------------------------------------------------------------------- sampling
# Shared with the corpus: one place decides what a dictionary, record, passage, chain is.

def sample_kv(world: World, rng: random.Random, n: int) -> list[tuple[str, str]]:
    """``n`` pairs, distinct keys and distinct values (as in the paper's probe)."""
    return list(zip(rng.sample(world.keys, n), rng.sample(world.values, n)))


def sample_options(world: World, rng: random.Random, value: str) -> tuple[list[str], int]:
    """The fact's value and ``n_options - 1`` distinct other values, shuffled; gold index."""
    others = rng.sample([v for v in world.values if v != value], world.config.n_options - 1)
    gold = rng.randrange(world.config.n_options)
    return others[:gold] + [value] + others[gold:], gold


def sample_record(world: World, rng: random.Random, n_fields: int) -> list[tuple[str, str]]:
    return [(f, rng.choice(world.values)) for f in rng.sample(world.fields, n_fields)]


def sample_passage(world: World, rng: random.Random, n_words: int) -> list[str]:
    """``n_words`` filler words; the last is the target, the one before it (the cue) occurs
    exactly once earlier, right before an earlier copy of the target."""
    cue, target = rng.sample(world.words, 2)
    pool = [w for w in world.words if w != cue]
    filler = [rng.choice(pool) for _ in range(max(0, n_words - 4))]
    at = rng.randrange(len(filler) + 1)
    return filler[:at] + [cue, target] + filler[at:] + [cue, target]


def sample_chains(world: World, rng: random.Random, count: int, depth: int) -> list[list[str]]:
    """``count`` chains of ``depth`` lookups each: ``[x3, x7, 42]`` for depth 2."""
    names = rng.sample(world.variables, count * depth)
    return [names[i * depth:(i + 1) * depth] + [rng.choice(world.values)] for i in range(count)]


# --------------------------------------------------------------------------- fingerprints

def fingerprint(kind: str, content: Any) -> tuple:
    """A hashable identity of a retrieval context, to keep training rows off evaluation rows."""
    if kind in ("kv", "record", "chain"):
        return (kind, frozenset(content))
    return (kind, tuple(content))


# --------------------------------------------------------------------------- generators

def _fact_subset(world: World, rng: random.Random) -> list[tuple[str, str, str]]:
    facts = world.fact_list
    n = min(world.config.n_eval, len(facts))
    return [facts[i] for i in sorted(rng.sample(range(len(facts)), n))]


def _mc(task: str, i: int, prompt: str, choices: list[str], answer: int, **extra) -> dict:
    return {"id": f"{task}-{i:05d}", "task": task, "kind": TASK_KIND[task], "prompt": prompt,
            "choices": choices, "answer": answer, **extra}


def _gen(task: str, i: int, prompt: str, target: str, **extra) -> dict:
    return {"id": f"{task}-{i:05d}", "task": task, "kind": TASK_KIND[task], "prompt": prompt,
            "target": target, **extra}


def gen_knowledge_cloze(world: World, rng: random.Random, task="micro_knowledge_cloze") -> list[dict]:
    rows = []
    for i, (r, e, v) in enumerate(_fact_subset(world, rng)):
        options, gold = sample_options(world, rng, v)
        rows.append(_mc(task, i, fact_prompt(r, e), [f" {o}" for o in options], gold))
    return rows


def gen_knowledge_statement(world: World, rng: random.Random) -> list[dict]:
    """Choose the true statement: one entity with its value, the others with wrong values."""
    task, k, rows = "micro_knowledge_statement", world.config.statement_choices, []
    for i, (r, e, v) in enumerate(_fact_subset(world, rng)):
        others = rng.sample([x for x in world.entities if x != e], k - 1)
        wrong = [rng.choice([x for x in world.values if x != world.facts[(r, o)]]) for o in others]
        gold = rng.randrange(k)
        # Each statement is a whole line (with its newline): without it the request
        # ("r3", " e17 42") would share lm-eval's one-token cache key with ("r3 e17", " 42")
        # of the cloze tasks, and lm-eval 0.4.13 then scores one with the other's logits.
        stmts = [f" {o} {w}\n" for o, w in zip(others, wrong)]
        stmts.insert(gold, f" {e} {v}\n")
        rows.append(_mc(task, i, r, stmts, gold))
    return rows


def gen_knowledge_fill(world: World, rng: random.Random) -> list[dict]:
    """Fill the blank: which entity has this value? Distractors are entities whose value differs."""
    task, k, rows = "micro_knowledge_fill", world.config.fill_choices, []
    for i, (r, e, v) in enumerate(_fact_subset(world, rng)):
        others = rng.sample([x for x in world.entities if x != e and world.facts[(r, x)] != v], k - 1)
        gold = rng.randrange(k)
        ents = others[:gold] + [e] + others[gold:]
        rows.append({"id": f"{task}-{i:05d}", "task": task, "kind": TASK_KIND[task],
                     "contexts": [fact_prompt(r, x) for x in ents], "target": f" {v}", "answer": gold})
    return rows


def gen_mmlu(world: World, rng: random.Random, task="micro_mmlu") -> list[dict]:
    rows = []
    for i, (r, e, v) in enumerate(_fact_subset(world, rng)):
        options, gold = sample_options(world, rng, v)
        rows.append(_mc(task, i, mmlu_prompt(r, e, options, world.letters),
                        [f" {l}" for l in world.letters], gold, options=options))
    return rows


def gen_kv(world: World, rng: random.Random, n_pairs: int | None = None, count: int | None = None,
           task="micro_kv") -> list[dict]:
    n = n_pairs or world.config.kv_pairs
    rows = []
    for i in range(count or world.config.n_eval):
        pairs = sample_kv(world, rng, n)
        gold = rng.randrange(n)
        rows.append(_mc(task, i, kv_prompt(pairs, pairs[gold][0]), [f" {v}" for _, v in pairs], gold,
                        n_pairs=n))
    return rows


def gen_swde(world: World, rng: random.Random) -> list[dict]:
    lo, hi = world.config.record_fields
    rows = []
    for i in range(world.config.n_eval):
        record = sample_record(world, rng, rng.randint(lo, hi))
        field, value = rng.choice(record)
        rows.append(_gen("micro_swde", i, swde_prompt(record, field), value))
    return rows


def gen_lambada(world: World, rng: random.Random) -> list[dict]:
    lo, hi = world.config.passage_words
    rows = []
    for i in range(world.config.n_eval):
        words = sample_passage(world, rng, rng.randint(lo, hi))
        rows.append(_gen("micro_lambada", i, " ".join(words[:-1]), " " + words[-1]))
    return rows


def gen_chain(world: World, rng: random.Random) -> list[dict]:
    c = world.config
    rows = []
    for i in range(c.n_eval):
        chains = sample_chains(world, rng, c.chain_count, c.chain_depth)
        lines = chain_lines(chains)
        rng.shuffle(lines)
        asked = rng.choice(chains)
        rows.append(_gen("micro_chain", i, chain_prompt(lines, asked[0]), " ".join(asked[1:]),
                         answer=asked[-1]))
    return rows


def gen_arc(world: World, rng: random.Random) -> dict[str, list[dict]]:
    """The same questions twice: completion of the value (regular) and the letter (chat)."""
    regular, chat = [], []
    for i, (r, e, v) in enumerate(_fact_subset(world, rng)):
        options, gold = sample_options(world, rng, v)
        regular.append(_mc("micro_arc_regular", i, fact_prompt(r, e), [f" {o}" for o in options], gold))
        chat.append(_gen("micro_arc_chat", i, mmlu_prompt(r, e, options, world.letters),
                         world.letters[gold], options=options))
    return {"micro_arc_regular": regular, "micro_arc_chat": chat}


_GENERATORS: dict[str, Callable[[World, random.Random], list[dict]]] = {
    "micro_knowledge_cloze": gen_knowledge_cloze,
    "micro_knowledge_statement": gen_knowledge_statement,
    "micro_knowledge_fill": gen_knowledge_fill,
    "micro_mmlu": gen_mmlu,
    "micro_kv": gen_kv,
    "micro_swde": gen_swde,
    "micro_lambada": gen_lambada,
    "micro_chain": gen_chain,
}


def _as_world(config: WorldConfig | World | dict | None) -> World:
    return config if isinstance(config, World) else build_world(config)


def generate_tasks(config: WorldConfig | World | dict | None = None, split: str = "test",
                   tasks: Iterable[str] | None = None) -> dict[str, list[dict]]:
    """All task rows of ``split``, ``{task: rows}``; a pure function of the config."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {SPLITS}")
    world = _as_world(config)
    wanted = list(tasks) if tasks is not None else list(TASKS)
    unknown = sorted(set(wanted) - set(TASKS))
    if unknown:
        raise ValueError(f"unknown micro task(s) {unknown}; known: {', '.join(TASKS)}")
    out: dict[str, list[dict]] = {}
    for name in wanted:
        if name in out:
            continue
        if name.startswith("micro_arc"):
            out.update({k: v for k, v in gen_arc(world, world.rng(split, "micro_arc")).items() if k in wanted})
        else:
            out[name] = _GENERATORS[name](world, world.rng(split, name))
    return {name: out[name] for name in wanted}


def kv_rows(config: WorldConfig | World | dict | None, n_pairs: int, count: int,
            split: str = "val") -> list[dict]:
    """KV rows at ``n_pairs`` pairs (the trainer's kv4/kv8/kv16)."""
    world = _as_world(config)
    return gen_kv(world, world.rng(split, "micro_kv", n_pairs), n_pairs=n_pairs, count=count)


def row_fingerprints(rows: Iterable[dict]) -> set[tuple]:
    """Fingerprints of the retrieval contexts in ``rows`` (see :func:`fingerprint`)."""
    out = set()
    for row in rows:
        task, p = row.get("task"), row.get("prompt", "")
        if task == "micro_kv" or row.get("fmt") == "compact":   # also gna.probes.kv compact rows
            lines = p.split("\n")[:-1]
            out.add(fingerprint("kv", [tuple(l.split()) for l in lines]))
        elif task == "micro_swde":
            words = p.split("\n")[0].split()
            out.add(fingerprint("record", list(zip(words[::2], words[1::2]))))
        elif task == "micro_chain":
            out.add(fingerprint("chain", [tuple(l.split()) for l in p.split("\n")[:-1]]))
        elif task == "micro_lambada":
            out.add(fingerprint("passage", p.split() + [row["target"].strip()]))
        elif task in ("micro_mmlu", "micro_arc_chat"):
            first = p.split("\n")[0].split()
            out.add(fingerprint("mmlu", [*first, *row["options"]]))
    return out


def evaluation_fingerprints(config: WorldConfig | World | dict | None = None,
                            kv_pairs: Iterable[int] = (4, 8, 16), kv_count: int = 0) -> set[tuple]:
    """Fingerprints of every evaluation row (test and val, plus trainer KV rows): the corpus
    never trains on these contexts."""
    world = _as_world(config)
    fps: set[tuple] = set()
    for split in SPLITS:
        for rows in generate_tasks(world, split).values():
            fps |= row_fingerprints(rows)
        for n in kv_pairs:
            fps |= row_fingerprints(kv_rows(world, n, kv_count or world.config.n_eval, split))
    return fps


def row_requests(row: dict) -> tuple[list[tuple[str, str]], int]:
    """A multiple-choice row as lm-eval scores it: ``[(context, continuation)]`` and gold index."""
    if "contexts" in row:
        return [(c, row["target"]) for c in row["contexts"]], row["answer"]
    return [(row["prompt"], c) for c in row["choices"]], row["answer"]


def micro_vocabulary(config: WorldConfig | World | dict | None = None) -> list[str]:
    """Every word any task or training row can contain (the tokenizer adds specials and newline)."""
    return _as_world(config).vocabulary()


# --------------------------------------------------------------------------- writing

def write_tasks(out_dir: str | os.PathLike, config: WorldConfig | World | dict | None = None,
                split: str = "test") -> dict[str, str]:
    """Write one ``<task>.jsonl`` per task and ``world.json`` (config + facts) into ``out_dir``,
    each atomically (:func:`gna.io.write_text`). Returns ``{task: path}``."""
    world = _as_world(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in generate_tasks(world, split).items():
        path = out / f"{name}.jsonl"
        write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), path)
        paths[name] = str(path)
    write_text(json.dumps(world.to_dict(), indent=1, sort_keys=True) + "\n", out / "world.json")
    return paths
