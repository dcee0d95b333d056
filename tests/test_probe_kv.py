"""The KV-retrieval probe generator, its JSONL files, and agreement with lm-eval."""
from __future__ import annotations

import json

import pytest
import torch

from gna.errors import ProbeError
from gna.probes import (english_words, generate_kv_probe, lm_eval_task_config, parse_probe_task, probe_suite,
                        probe_task_name, read_jsonl, score, sweep, write_jsonl)

KEYS = [f"k{i}" for i in range(20)]  # the keys in the test vocabulary


def values_of(ex) -> list[int]:
    return [int(c) for c in ex["choices"]]


@pytest.mark.parametrize("fmt", ["paper", "compact"])
def test_same_seed_same_examples_other_seed_other(fmt):
    kw = dict(fmt=fmt, key_pool=KEYS if fmt == "compact" else None)
    assert generate_kv_probe(10, 20, seed=3, **kw) == generate_kv_probe(10, 20, seed=3, **kw)
    assert generate_kv_probe(10, 20, seed=3, **kw) != generate_kv_probe(10, 20, seed=4, **kw)


@pytest.mark.parametrize("n", [1, 10, 50, 100])
def test_example_structure(n):
    for ex in generate_kv_probe(n, 20, seed=0):
        values, lines = values_of(ex), ex["prompt"].split("\n")
        keys = [line.split(":")[0] for line in lines[1:-1]]
        assert lines[0] == "Memorize the following dictionary:" and len(lines) == n + 2
        assert lines[1:-1] == [f"{k}:{v}" for k, v in zip(keys, values)]
        assert lines[-1] == f"The value of the key '{ex['query']}' is"
        assert len(set(values)) == n and all(0 <= v <= 99 for v in values)
        assert len(set(keys)) == n and all(k.isalpha() and k.islower() for k in keys)
        assert ex["query"] in keys
        assert ex["choices"][ex["answer"]] == " " + str(values[keys.index(ex["query"])])
        assert ex["n_pairs"] == n and ex["seed"] == 0


def test_compact_format_and_separator():
    ex = generate_kv_probe(5, 1, seed=1, fmt="compact", key_pool=KEYS, separator="")[0]
    lines = ex["prompt"].split("\n")
    keys = [line.split(" ")[0] for line in lines[:-1]]
    assert lines[:-1] == [f"{k} {v}" for k, v in zip(keys, values_of(ex))]
    assert lines[-1] == f"{ex['query']} ?" and set(keys) <= set(KEYS)
    assert ex["choices"][ex["answer"]] == str(values_of(ex)[keys.index(ex["query"])])  # no separator


def test_bad_arguments_raise():
    with pytest.raises(ProbeError, match="n_pairs=101"):
        generate_kv_probe(101, 1, seed=0)
    with pytest.raises(ProbeError, match="fewer than n_pairs"):
        generate_kv_probe(21, 1, seed=0, fmt="compact", key_pool=KEYS)
    with pytest.raises(ProbeError, match="format"):
        generate_kv_probe(5, 1, seed=0, fmt="yaml")


def test_word_pool_and_sweep():
    words = english_words()
    assert len(words) > 5000 and all(w.isascii() and w.isalpha() and w.islower() for w in words)
    sets = sweep(n_values=(10, 15), n_examples=3, seed=7)
    assert list(sets) == [10, 15] and all(len(s) == 3 and s[0]["n_pairs"] == n for n, s in sets.items())
    assert sets[10][0]["seed"] != sets[15][0]["seed"]
    assert sweep(n_values=(10, 15), n_examples=3, seed=7) == sets


def test_jsonl_round_trip_and_errors(tmp_path):
    examples = generate_kv_probe(10, 5, seed=0)
    path = write_jsonl(examples, tmp_path / "sub" / "kv.jsonl")
    assert read_jsonl(path) == examples
    assert [p.name for p in path.parent.iterdir()] == ["kv.jsonl"]  # no temp file left behind
    with pytest.raises(ProbeError, match="missing.jsonl"):
        read_jsonl(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(examples[0]) + "\n{not json\n")
    with pytest.raises(ProbeError, match="bad.jsonl.*line 2"):
        read_jsonl(bad)
    # lm-eval reads 'answer' as the index of the right choice: a string, or an index past the
    # choices, is refused by file and line (an lm-eval task of that file too)
    for wrong in ("3", len(examples[0]["choices"])):
        bad.write_text(json.dumps(examples[0]) + "\n" + json.dumps({**examples[1], "answer": wrong}) + "\n")
        with pytest.raises(ProbeError, match="bad.jsonl.*line 2.*'answer' the index"):
            lm_eval_task_config(bad, "kv_bad")


def test_a_probe_task_name_round_trips_and_a_foreign_one_is_refused():
    # the names the results and the figures already carry (Fig. 4's, top-k's control, the baselines')
    assert probe_task_name(10, 3) == "kv_n10_s3" and probe_task_name(10) == "kv_n10"
    for n, seed in [(10, 3), (50, 0), (4, None)]:
        assert parse_probe_task(probe_task_name(n, seed)) == (n, seed)
    for bad in ("kv_n10_s", "kv_retrieval_s1", "kv_n10x", "mmlu_local"):
        with pytest.raises(ValueError, match="not a KV probe's task name"):
            parse_probe_task(bad)


def test_a_probe_suite_names_each_set_and_refuses_a_set_given_twice(tmp_path):
    path = write_jsonl(generate_kv_probe(4, 3, seed=0), tmp_path / "p.jsonl")
    suite = probe_suite([(4, 0, path), (4, 1, path), (4, None, path)])
    assert list(suite) == ["kv_n4_s0", "kv_n4_s1", "kv_n4"]
    assert suite["kv_n4_s1"] == lm_eval_task_config(path, "kv_n4_s1")
    with pytest.raises(ValueError, match="twice"):
        probe_suite([(4, 0, path), (4, 0, path)])


def test_lm_eval_agrees_with_scorer(tiny_model, word_tokenizer, tmp_path, monkeypatch):
    """lm-eval's multiple-choice accuracy and per-choice log-likelihoods on our JSONL equal our
    scorer's, on a tiny Llama: compact format (single-token choices), the same with two-token
    values (" 4 2", one row per choice), and the paper format (its words are mostly <unk> for the
    word-level tokenizer, but both sides tokenize it the same way)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    single = generate_kv_probe(8, 12, seed=0, fmt="compact", key_pool=KEYS)
    # choices that extend one another (" 1", " 1 1"), as a benchmark's may: not a KV probe of the project's
    # (without n_pairs; gna.probes.values refuses those), still scored as lm-eval scores it
    multi = [{**{k: v for k, v in ex.items() if k != "n_pairs"}, "choices": [" " + " ".join(c.strip())
                                                                            for c in ex["choices"]]} for ex in single]
    paper = generate_kv_probe(6, 8, seed=0)
    sets = {"kv_single": single, "kv_multi": multi, "kv_paper": paper}
    tasks = []
    for name, examples in sets.items():
        cfg = lm_eval_task_config(write_jsonl(examples, tmp_path / f"{name}.jsonl"), name)
        cfg["dataset_kwargs"]["cache_dir"] = str(tmp_path / "datasets")
        tasks.append(cfg)

    (model, _), tok = tiny_model("llama"), word_tokenizer
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=8, max_length=512)
    out = simple_evaluate(model=lm, tasks=tasks, task_manager=TaskManager(include_defaults=False),
                          bootstrap_iters=0, log_samples=True)
    for name, examples in sets.items():
        ours = score(model, tok, examples, batch_size=8)
        samples = sorted(out["samples"][name], key=lambda s: s["doc_id"])
        theirs = torch.tensor([[ll for ll, _ in s["filtered_resps"]] for s in samples], dtype=torch.float64)
        torch.testing.assert_close(theirs, ours.logprobs, atol=1e-4, rtol=0)
        assert out["results"][name]["acc,none"] == pytest.approx(ours.accuracy, abs=1e-12)
