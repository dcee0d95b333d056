"""Fresh items for the confirmation: every document the screen's sample did not draw, in an order
seeded by the confirmation's seed, so that a job scoring the first ``n`` scores a simple random sample
of the rest (lm-eval's ``limit`` takes a task's first documents). Disjoint from the screen by
construction (the screen's draw is recomputed from its size and seed, the same function that drew it)
and recorded: each manifest entry lists the source index of every document written, which the tests
compare with the screen's.

MMLU's screen is stratified by subject; the fresh order is not (a prefix of a shuffled pool): the
confirmation's items are a simple random sample of the questions the screen left, which estimates the
same mean.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from ..errors import ConfigError
from ..evaluation import local_mmlu, local_suite
from ..io import sha256_file, write_json, write_text


def fresh_order(total: int, screen: list[int], size: int, key: str) -> list[int]:
    """``size`` source indices among ``range(total)`` outside ``screen``, in the order a generator
    seeded with ``key`` shuffles them (refused: more than the screen left)."""
    taken = set(screen)
    pool = [i for i in range(total) if i not in taken]
    if size > len(pool):
        raise ConfigError(f"confirmation: {key.split(':')[0]} has {len(pool)} documents the screen did not draw, "
                          f"{size} asked for (confirmation.caps)")
    random.Random(key).shuffle(pool)
    return pool[:size]


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def mmlu_screen_indices(rows: list[dict], size: int | None, seed: int) -> list[int]:
    """The source indices of the screen's stratified MMLU sample (:func:`local_mmlu.stratified_sample`)."""
    where = {id(r): i for i, r in enumerate(rows)}
    return sorted(where[id(r)] for r in local_mmlu.stratified_sample(rows, size, seed))


def build_mmlu(source, out_dir, screen_size: int | None, screen_seed: int, size: int, seed: int) -> dict:
    """The fresh MMLU questions at ``out_dir`` (the sample file and both task YAMLs, as the screen's
    :func:`local_mmlu.build` lays them out) and their manifest; returns it."""
    rows, headers = local_mmlu.read_source(source)
    screen = mmlu_screen_indices(rows, screen_size, screen_seed)
    picked = fresh_order(len(rows), screen, size, f"mmlu:confirm:{seed}")
    sample = [rows[i] for i in picked]
    out = Path(out_dir)
    manifest = {"source": str(source), "source_sha256": sha256_file(source), "source_questions": len(rows),
                "source_header_rows_dropped": headers, "size": len(sample), "seed": seed,
                "screen": {"size": screen_size, "seed": screen_seed},
                "allocation": "a simple random sample of the questions the screen did not draw", "order": "random",
                "source_index": picked, "screen_index": screen, "sample_file": local_mmlu.SAMPLE_FILE,
                "sample_sha256": local_mmlu.rows_sha256(sample), "tasks": list(local_mmlu.TASKS)}
    write_text(_lines(sample), out / local_mmlu.SAMPLE_FILE)
    for name, text in local_mmlu.task_yaml_texts(out.resolve()).items():
        write_text(text, out / name)
    write_json(manifest, out / local_mmlu.MANIFEST_FILE)
    return manifest


def suite_screen_indices(total: int, size: int | None, seed: int, task: str) -> list[int]:
    """The source indices :func:`local_suite.sample` draws for the screen."""
    if size is None or size >= total:
        return list(range(total))
    return sorted(random.Random(f"{task}:{seed}").sample(range(total), size))


def build_suite(root, out_dir, sizes: dict[str, int], screen_sizes: dict, screen_seed: int, seed: int) -> dict:
    """The fresh documents of each task of ``sizes`` (task -> documents) at ``out_dir``, laid out as
    :func:`local_suite.build` lays out the screen's (so its task configs read them), and the manifest."""
    unknown = sorted(set(sizes) - set(local_suite.SOURCES))
    if unknown:
        raise ConfigError(f"confirmation: no fresh documents for {unknown}; the local suite's tasks: "
                          f"{list(local_suite.SOURCES)}")
    screen_of = local_suite.task_sizes(list(sizes), screen_sizes)
    files, manifest = {}, {"root": str(root), "seed": seed, "screen_seed": screen_seed, "tasks": list(sizes),
                           "per_task": {}}
    for task, size in sizes.items():
        member, kind, split, _ = local_suite.SOURCES[task]
        docs = local_suite.read_documents(task, root)
        screen = suite_screen_indices(len(docs), screen_of[task], screen_seed, task)
        picked = fresh_order(len(docs), screen, size, f"{task}:confirm:{seed}")
        files[local_suite.data_file(task)] = _lines([docs[i] for i in picked])
        manifest["per_task"][task] = {"source": member, "source_sha256": sha256_file(Path(root) / member),
                                      "kind": kind, "split": split, "documents": len(docs), "size": len(picked),
                                      "seed": seed, "file": local_suite.data_file(task), "source_index": picked,
                                      "screen_index": screen}
    for name, text in files.items():
        write_text(text, Path(out_dir) / name)
    write_json(manifest, Path(out_dir) / local_suite.MANIFEST_FILE)
    return manifest


def fresh_sizes(caps: dict, knowledge: list[str], retrieval: list[str]) -> tuple[int, dict[str, int]]:
    """(MMLU's fresh questions, each suite task's fresh documents) for ``caps`` (a role's items pooled
    over its tasks, as the pick counts them; :func:`gna.confirmation.judge.per_task` shares them out):
    a knowledge task its share of the knowledge cap, a retrieval task (and MMLU) the whole retrieval
    cap, whatever the number of tasks it is pooled with."""
    per_knowledge = -(-caps["knowledge"] // max(len(knowledge), 1))
    sizes = {t: per_knowledge for t in knowledge}
    sizes.update({t: max(sizes.get(t, 0), caps["retrieval"]) for t in retrieval})
    return max(caps["mmlu"], caps["retrieval"]), sizes
