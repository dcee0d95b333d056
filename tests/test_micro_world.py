"""The micro world: seeded tasks, knowledge/retrieval separability, lm-eval, training smoke."""
from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest
import torch

from gna.errors import ConfigError
from gna.micro import tasks as T
from gna.micro.corpus import IGNORE, Corpus, CorpusConfig
from gna.micro.lm_eval_tasks import micro_task_manager, task_configs, task_yaml_texts
from gna.micro.tokenizer import word_level_tokenizer
from gna.micro.recipes import FAMILIES, FAMILY_PRESETS
from gna.micro.train import train
from gna.micro.world import WorldConfig, build_world

REPO = Path(__file__).resolve().parents[1]
SMALL = WorldConfig(n_eval=64)


@pytest.fixture(scope="module")
def world():
    return build_world(SMALL)


@pytest.fixture(scope="module")
def tok(world):
    return word_level_tokenizer(T.micro_vocabulary(world))


@pytest.fixture(scope="module")
def rows(world):
    return T.generate_tasks(world)


# ----------------------------------------------------------------------------- determinism

def test_same_seed_same_files_other_seed_other_world(tmp_path):
    a = T.write_tasks(tmp_path / "a", SMALL)
    b = T.write_tasks(tmp_path / "b", SMALL)
    assert set(a) == set(T.TASKS)
    for name in T.TASKS:
        assert Path(a[name]).read_bytes() == Path(b[name]).read_bytes(), name
    assert (tmp_path / "a" / "world.json").read_bytes() == (tmp_path / "b" / "world.json").read_bytes()
    other = build_world(WorldConfig(n_eval=64, seed=1))
    assert other.facts != build_world(SMALL).facts
    assert T.generate_tasks(other)["micro_kv"] != T.generate_tasks(SMALL)["micro_kv"]
    assert not list((tmp_path / "a").glob(".*tmp*")), "temporary files left behind"


def test_corpus_is_seeded(world, tok):
    def first(seed):
        c = Corpus(world, None, tok.get_vocab(), tok.bos_token_id, tok.pad_token_id, seed=seed, exclude=set())
        return [c.batch(s, 4)[0] for s in range(3)]
    assert all(torch.equal(x, y) for x, y in zip(first(0), first(0)))
    assert not all(torch.equal(x, y) for x, y in zip(first(0), first(1)))


def test_config_validation():
    with pytest.raises(ConfigError):
        WorldConfig(kv_pairs=500)
    with pytest.raises(ConfigError):
        WorldConfig.from_dict({"n_keyz": 3})
    with pytest.raises(ConfigError):
        CorpusConfig(mmlu_prob=2.0)
    with pytest.raises(ValueError):
        T.generate_tasks(SMALL, tasks=["micro_nope"])


# ----------------------------------------------------------------------------- formats

def test_vocabulary_covers_the_kv_probe_and_every_row(world, tok, rows):
    vocab = set(T.micro_vocabulary(world))
    assert {f"k{i}" for i in range(300)} | {str(i) for i in range(100)} | {"?"} <= vocab
    unk = tok.unk_token_id
    for name, task_rows in rows.items():
        for row in task_rows:
            texts = [row.get("prompt", ""), row.get("target", ""), *row.get("choices", []),
                     *row.get("contexts", [])]
            for text in texts:
                assert unk not in tok(text).input_ids, (name, text)
    # multiple-choice continuations are single tokens with their leading space
    for name in ("micro_kv", "micro_mmlu", "micro_knowledge_cloze", "micro_arc_regular"):
        for row in rows[name][:5]:
            assert all(c.startswith(" ") and len(tok(c, add_special_tokens=False).input_ids) == 1
                       for c in row["choices"])
    # lm-eval (0.4.13, HFLM logits_cache on) groups log-likelihood requests by
    # context + continuation[:-1] and scores the group with one request's logits: requests of
    # different tasks must not share that key with a different context/continuation split.
    keys: dict[tuple, tuple] = {}
    for name, task_rows in rows.items():
        if name in ("micro_swde", "micro_chain", "micro_arc_chat"):
            continue
        for row in task_rows:
            reqs = T.row_requests(row)[0] if name != "micro_lambada" else [(row["prompt"], row["target"])]
            for ctx, cont in reqs:
                c = tok(ctx).input_ids
                whole = tok(ctx + cont).input_ids
                key, split = tuple(whole[:-1]), len(c)
                assert keys.setdefault(key, (split, name))[0] == split, (name, ctx, cont, keys[key])
    # the probe's compact KV format
    kv = rows["micro_kv"][0]
    *lines, query = kv["prompt"].split("\n")
    assert all(re.fullmatch(r"k\d+ \d+", l) for l in lines) and re.fullmatch(r"k\d+ \?", query)


def test_corpus_rows_round_trip_and_train_only_answers(world, tok):
    c = Corpus(world, None, tok.get_vocab(), tok.bos_token_id, tok.pad_token_id, seed=0, exclude=set())
    for step in (0, 10_000):
        for _ in range(20):
            ids, labels = c.row(step)
            assert len(ids) == len(labels) <= c.config.max_len
            assert tok.unk_token_id not in ids
            text = tok.decode(ids, skip_special_tokens=False).replace("<s>", "")
            assert tok(text, add_special_tokens=False).input_ids == [i for i in ids if i != tok.bos_token_id]
            assert all(l == IGNORE or l == i for i, l in zip(ids, labels))
            assert sum(l != IGNORE for l in labels) < len(ids) / 2  # loss on answers, not on contexts
    x, y = c.batch(0, 8)
    assert x.shape == y.shape and (y[x == tok.pad_token_id] == IGNORE).all()
    assert c.kv_nmax(0) == 2 and c.kv_nmax(10_000) == 16


def test_corpus_redraws_evaluation_contexts(world, tok):
    """Retrieval contexts seen at evaluation are never trained on: excluded ones are redrawn."""
    excluded = {T.fingerprint("kv", [(f"k{i}", v)]) for i in range(150) for v in world.values}
    cfg = CorpusConfig(kv_start_pairs=1, kv_max_pairs=1, mmlu_prob=0, record_prob=0, passage_prob=0, chain_prob=0)
    c = Corpus(world, cfg, tok.get_vocab(), tok.bos_token_id, tok.pad_token_id, seed=0, exclude=excluded)
    keys = []
    for _ in range(100):
        ids, _ = c.row(0)
        toks = tok.convert_ids_to_tokens(ids)
        keys += [toks[i + 1] for i, t in enumerate(toks) if t == "<s>" and toks[i + 1].startswith("k")
                 and toks[i + 3] == "\n"]
    assert len(keys) >= 90 and all(int(k[1:]) >= 150 for k in keys)
    assert c.rejected > 0
    # and the real exclusion set covers the test and validation rows
    fps = T.evaluation_fingerprints(world)
    assert T.row_fingerprints(T.generate_tasks(world, "test")["micro_kv"]) <= fps


# ----------------------------------------------------------------------------- separability

def _knowledge_oracle(world):
    """Knows every fact, ignores the context: scores a (context, continuation) by whether the
    text ends in a true fact statement."""
    def score(ctx, cont):
        words = (ctx + cont).split()
        if len(words) >= 3 and (words[-3], words[-2]) in world.facts:
            return float(world.facts[(words[-3], words[-2])] == words[-1])
        return 0.0
    return score


def _context_oracle(row):
    """Perfect in-context lookup, no facts: the value after the queried key, or the letter of
    an option... which it cannot pick without knowing the fact."""
    p = row.get("prompt", "")
    lines = p.split("\n")
    if row["task"] == "micro_kv":
        q = lines[-1].split()[0]
        v = dict(l.split() for l in lines[:-1])[q]
        return row["choices"].index(" " + v)
    return 0  # nothing in the context decides: a fixed guess


def _accuracy(pred, rows):
    return sum(pred(r) == r["answer"] for r in rows) / len(rows)


def test_knowledge_and_retrieval_are_separable(world, rows):
    know = _knowledge_oracle(world)

    def knowledge_pred(row):
        reqs, _ = T.row_requests(row)
        scores = [know(c, x) for c, x in reqs]
        return max(range(len(scores)), key=lambda i: (scores[i], -i))

    def both_pred(row):  # knows the fact AND reads the letter next to its value
        r, e = row["prompt"].split("\n")[0].split()
        return row["options"].index(world.facts[(r, e)])

    for name in ("micro_knowledge_cloze", "micro_knowledge_statement", "micro_knowledge_fill", "micro_arc_regular"):
        assert _accuracy(knowledge_pred, rows[name]) == 1.0, name
        assert _accuracy(_context_oracle, rows[name]) <= 0.65, name      # chance: 1/4 or 1/2
    assert _accuracy(_context_oracle, rows["micro_kv"]) == 1.0
    assert _accuracy(knowledge_pred, rows["micro_kv"]) <= 0.3             # chance 1/8
    assert _accuracy(knowledge_pred, rows["micro_mmlu"]) <= 0.45          # chance 1/4
    assert _accuracy(_context_oracle, rows["micro_mmlu"]) <= 0.45
    assert _accuracy(both_pred, rows["micro_mmlu"]) == 1.0

    value_words = set(world.values)
    for name, task_rows in rows.items():
        for row in task_rows:
            kind = T.TASK_KIND[name]
            text = row.get("prompt") or " ".join(row["contexts"])
            if kind == "retrieval":   # the answer is in the prompt
                answer = row.get("target") or row["choices"][row["answer"]]
                assert answer.split()[-1] in text.split(), (name, row)
            elif kind == "knowledge":  # no value at all in the prompt, so none to copy
                assert not value_words & set(text.split()), (name, row)
            # retrieval prompts never mention a fact's relation/entity, so memorised facts can't help
            if kind == "retrieval":
                assert not set(text.split()) & (set(world.relations) | set(world.entities))


# ----------------------------------------------------------------------------- lm-eval

def test_yaml_files_are_generated_from_the_dicts():
    disk = {p.name: p.read_text() for p in (REPO / "workflow" / "tasks").glob("micro_*.yaml")}
    assert disk == task_yaml_texts(), "run: python -m gna.micro.lm_eval_tasks workflow/tasks"
    from lm_eval.tasks import TaskManager
    tm = TaskManager(include_path=str(REPO / "workflow" / "tasks"), include_defaults=False)
    assert set(T.TASKS) | {"micro_knowledge"} <= set(tm.all_tasks)


def test_lm_eval_runs_every_task(tmp_path, monkeypatch, world, tok):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets", raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from transformers import LlamaConfig, LlamaForCausalLM

    data = tmp_path / "data"
    T.write_tasks(data, WorldConfig(n_eval=8))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                                         pad_token_id=0)).eval()
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=8, max_length=256)
    configs = task_configs(data)
    assert all(Path(c["dataset_kwargs"]["data_files"]["test"]).is_absolute() for c in configs)
    out = simple_evaluate(model=lm, tasks=configs, limit=8, bootstrap_iters=0,
                          task_manager=TaskManager(include_defaults=False), log_samples=False)
    res = out["results"]
    expect = {"micro_knowledge_cloze": "acc,none", "micro_knowledge_statement": "acc,none",
              "micro_knowledge_fill": "acc,none", "micro_mmlu": "acc,none", "micro_kv": "acc,none",
              "micro_swde": "contains,strict-match", "micro_lambada": "perplexity,none",
              "micro_chain": "answer_match,strict-match", "micro_arc_regular": "acc,none",
              "micro_arc_chat": "exact_match,letter"}
    for name, metric in expect.items():
        assert name in res and metric in res[name], (name, res.get(name))
        assert 0 <= res[name][metric] <= (1 if "perplexity" not in metric else float("inf"))
    assert "exact_match,strict-match" in res["micro_swde"] and "acc,none" in res["micro_lambada"]
    # the knowledge group, by name, through a task manager over absolute-path YAMLs
    group = simple_evaluate(model=lm, tasks=["micro_knowledge"], limit=4, bootstrap_iters=0, log_samples=False,
                            task_manager=micro_task_manager(data, tmp_path / "yaml"))
    assert "acc,none" in group["results"]["micro_knowledge"]
    assert set(T.KNOWLEDGE_TASKS) <= set(group["results"])


# ----------------------------------------------------------------------------- training

TINY = {"llama": dict(hidden_size=32, intermediate_size=64),
        "mamba2": dict(hidden_size=32, num_heads=4, head_dim=16, state_size=8, chunk_size=32),
        "mamba1": dict(hidden_size=32, state_size=4),
        "zamba2": dict(hidden_size=32, mamba_d_state=8, n_mamba_heads=4, intermediate_size=64, chunk_size=32),
        "bamba": dict(hidden_size=32, mamba_d_state=8, mamba_n_heads=4, intermediate_size=64, mamba_chunk_size=32)}
TINY_TRAIN = dict(max_steps=3, batch_size=4, eval_every=2, eval_rows=8, progress=False,
                  world=dict(n_eval=8), corpus=dict(max_len=96, mmlu_per_row=1, kv_max_pairs=4))


def test_presets_cover_every_family():
    assert set(FAMILY_PRESETS) == set(FAMILIES) == set(TINY)


@pytest.mark.parametrize("family", FAMILIES)
def test_train_smoke_saves_a_loadable_model(family, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / family
    summary = train(family, TINY[family], TINY_TRAIN, out, seed=0)
    assert summary["steps"] == 3 and summary["stopped"] == "max_steps"
    assert [p.name for p in tmp_path.iterdir()] == [family], "temporary directory left behind"
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tok = AutoTokenizer.from_pretrained(out)
    assert type(model).__name__ == {"llama": "LlamaForCausalLM", "mamba2": "Mamba2ForCausalLM",
                                    "mamba1": "MambaForCausalLM", "zamba2": "Zamba2ForCausalLM",
                                    "bamba": "BambaForCausalLM"}[family]
    ids = tok("k5 12\nk7 3\nk5 ?", return_tensors="pt").input_ids
    assert ids[0, 0] == tok.bos_token_id and tok.unk_token_id not in ids
    assert model(ids).logits.shape == (1, ids.shape[1], len(tok))
    with open(out / "train_log.csv") as f:
        log = list(csv.DictReader(f))
    assert [r["step"] for r in log] == ["2", "3"] and {"loss", "kv8", "knowledge", "mmlu"} <= set(log[0])
    cfg = json.loads((out / "train_config.json").read_text())
    assert cfg["family"] == family and cfg["train"]["max_steps"] == 3 and cfg["seed"] == 0
    assert (out / "model.safetensors").is_file()
    if family == "mamba1":
        assert model.config.use_mambapy
    if family == "zamba2":  # the shared block is one set of weights across its invocations
        layers = [l for l in model.model.layers if hasattr(l, "shared_transformer")]
        assert len(layers) >= 2
        assert layers[0].shared_transformer.self_attn.q_proj.weight is layers[1].shared_transformer.self_attn.q_proj.weight


def test_training_is_byte_reproducible(tmp_path):
    a = train("llama", TINY["llama"], TINY_TRAIN, tmp_path / "a", seed=3)
    b = train("llama", TINY["llama"], TINY_TRAIN, tmp_path / "b", seed=3)
    assert a["metrics"] == b["metrics"]
    for name in ("model.safetensors", "train_config.json", "config.json", "tokenizer.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    # an existing output directory is replaced as a whole
    (tmp_path / "a" / "stale").write_text("x")
    train("llama", TINY["llama"], {**TINY_TRAIN, "max_steps": 2}, tmp_path / "a", seed=3)
    assert not (tmp_path / "a" / "stale").exists()
    assert json.loads((tmp_path / "a" / "train_summary.json").read_text())["steps"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_phases_switch_corpus_and_restart_the_optimizer(tmp_path):
    phased = {**TINY_TRAIN, "max_steps": 100, "eval_every": 2, "targets": {},
              "phases": [{"name": "a", "steps": 2, "corpus": {"mmlu_prob": 0.0}},
                         {"name": "b", "steps": 2, "restart": True, "lr": 1e-3, "warmup_steps": 1,
                          "decay_steps": 2}]}
    s = train("llama", TINY["llama"], phased, tmp_path / "m", seed=0)
    assert s["steps"] == 4 and [p["name"] for p in s["phases"]] == ["a", "b"]
    assert [(p["start"], p["end"]) for p in s["phases"]] == [(0, 2), (2, 4)]
    with open(tmp_path / "m" / "train_log.csv") as f:
        log = list(csv.DictReader(f))
    assert [(r["step"], r["phase"]) for r in log] == [("2", "a"), ("4", "b")]
    assert float(log[1]["lr"]) <= 1e-3      # the restarted schedule's lr, not the first one's
    cfg = json.loads((tmp_path / "m" / "train_config.json").read_text())
    assert cfg["phases"][0]["corpus"]["mmlu_prob"] == 0.0 and cfg["phases"][1]["corpus"]["mmlu_prob"] == 1.0
    with pytest.raises(ConfigError):
        train("llama", TINY["llama"], {**phased, "phases": [{"steps": 2, "lr": 1e-3}]}, tmp_path / "x")
    with pytest.raises(ConfigError):
        train("llama", TINY["llama"], {**phased, "phases": [{"steps": 2, "corpus": {"nope": 1}}]}, tmp_path / "x")


@pytest.mark.parametrize("interrupt_at", [2, 3])   # the 2nd eval (mid phase a) / the 3rd (phase b's first)
def test_interrupted_training_resumes_from_its_checkpoint_to_the_same_bytes(tmp_path, monkeypatch, interrupt_at):
    import gna.micro.train as tr
    phased = {**TINY_TRAIN, "max_steps": 100, "eval_every": 2, "targets": {},
              "phases": [{"name": "a", "steps": 4, "corpus": {"mmlu_prob": 0.0}},
                         {"name": "b", "steps": 4, "restart": True, "lr": 1e-3, "warmup_steps": 1,
                          "decay_steps": 4}]}
    whole = train("llama", TINY["llama"], phased, tmp_path / "whole", seed=0)
    real, calls = tr.evaluate, []

    def dies(*args, **kwargs):
        calls.append(1)
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(tr, "evaluate", dies)
    with pytest.raises(KeyboardInterrupt):
        train("llama", TINY["llama"], phased, tmp_path / "m", seed=0)
    ckpt = tmp_path / "m.ckpt"
    assert [p.name for p in ckpt.iterdir()] == [f"step-{2 * (interrupt_at - 1):06d}"] and not (tmp_path / "m").exists()
    monkeypatch.setattr(tr, "evaluate", real)
    resumed = train("llama", TINY["llama"], phased, tmp_path / "m", seed=0)
    assert resumed["steps"] == whole["steps"] == 8 and resumed["metrics"] == whole["metrics"]
    assert resumed["phases"] == whole["phases"]
    assert (tmp_path / "m/model.safetensors").read_bytes() == (tmp_path / "whole/model.safetensors").read_bytes()
    strip = lambda p: [{k: v for k, v in r.items() if k not in ("elapsed_s", "steps_per_s")}
                       for r in csv.DictReader(open(p))]
    assert strip(tmp_path / "m/train_log.csv") == strip(tmp_path / "whole/train_log.csv")
    assert not ckpt.exists()                       # removed once the model is written
    # a checkpoint of another recipe is never resumed
    monkeypatch.setattr(tr, "evaluate", dies)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        train("llama", TINY["llama"], phased, tmp_path / "n", seed=0)
    monkeypatch.setattr(tr, "evaluate", real)
    other = train("llama", TINY["llama"], phased, tmp_path / "n", seed=1)
    assert other["metrics"] != whole["metrics"] or (tmp_path / "n/model.safetensors").read_bytes() != \
        (tmp_path / "whole/model.safetensors").read_bytes()


def test_a_checkpoint_goes_on_under_a_longer_budget_to_the_bytes_of_a_run_given_it_from_the_start(tmp_path,
                                                                                                   monkeypatch):
    import gna.micro.train as tr

    def phased(steps):   # the budget is the last phase's steps and max_steps
        return {**TINY_TRAIN, "max_steps": steps, "eval_every": 2, "targets": {},
                "phases": [{"name": "a", "steps": 2, "corpus": {"mmlu_prob": 0.0}}, {"name": "b", "steps": steps - 2}]}

    longer = train("llama", TINY["llama"], phased(8), tmp_path / "longer", seed=0)
    real, calls = tr.evaluate, []

    def dies(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:      # killed at step 6 of a 6-step run: its step-4 checkpoint stays
            raise KeyboardInterrupt("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(tr, "evaluate", dies)
    with pytest.raises(KeyboardInterrupt):
        train("llama", TINY["llama"], phased(6), tmp_path / "m", seed=0)
    assert [p.name for p in (tmp_path / "m.ckpt").iterdir()] == ["step-000004"]
    evals = []
    monkeypatch.setattr(tr, "evaluate", lambda *a, **k: evals.append(1) or real(*a, **k))
    resumed = train("llama", TINY["llama"], phased(8), tmp_path / "m", seed=0)
    assert len(evals) == 2          # steps 6 and 8: it went on from step 4, not from the start
    assert resumed["steps"] == longer["steps"] == 8 and resumed["metrics"] == longer["metrics"]
    assert (tmp_path / "m/model.safetensors").read_bytes() == (tmp_path / "longer/model.safetensors").read_bytes()
    # a checkpoint past a shorter budget is not resumed: the 3-step run starts afresh
    monkeypatch.setattr(tr, "evaluate", dies)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        train("llama", TINY["llama"], phased(8), tmp_path / "n", seed=0)
    monkeypatch.setattr(tr, "evaluate", real)
    short = train("llama", TINY["llama"], phased(3), tmp_path / "n", seed=0)
    fresh = train("llama", TINY["llama"], phased(3), tmp_path / "f", seed=0)
    assert short["steps"] == fresh["steps"] == 3
    assert (tmp_path / "n/model.safetensors").read_bytes() == (tmp_path / "f/model.safetensors").read_bytes()


def test_phase_targets_end_a_phase_at_a_fixed_evaluation(tmp_path):
    phased = {**TINY_TRAIN, "max_steps": 100, "eval_every": 2, "targets": {},
              "phases": [{"name": "a", "steps": 6, "targets": {"knowledge": 0.0}}, {"name": "b", "steps": 2}]}
    s = train("llama", TINY["llama"], phased, tmp_path / "m", seed=0)
    assert s["phases"][0] == {**s["phases"][0], "end": 2, "stopped": "targets"} and s["steps"] == 4


def test_fast_mamba_scan_equals_transformers_forward_and_gradients():
    """The training-time Mamba-1 scan (gna.micro.mamba_scan) is exact: same logits and
    gradients as transformers' own MambaForCausalLM forward, on both of its torch paths."""
    from transformers import MambaConfig, MambaForCausalLM
    from gna.micro.mamba_scan import fast_mamba_scan
    from transformers.models.mamba import modeling_mamba as mm

    original = mm.mamba_selective_scan
    x = torch.randint(0, 50, (3, 37), generator=torch.Generator().manual_seed(0))
    for mambapy in (False, True):
        torch.manual_seed(0)
        model = MambaForCausalLM(MambaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, state_size=8,
                                             expand=2, use_mambapy=mambapy)).train()
        with torch.no_grad():  # make the recurrence matter: slower decay than the default init
            for layer in model.backbone.layers:
                layer.mixer.A_log.mul_(0.5)

        def run(fast):
            model.zero_grad()
            with fast_mamba_scan(fast):
                logits = model(input_ids=x).logits
                (logits.float().log_softmax(-1)[..., :7].sum() / x.numel()).backward()
            return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

        ref, gref = run(False)
        out, gout = run(True)
        assert mm.mamba_selective_scan is original          # restored on exit
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        for name in gref:
            torch.testing.assert_close(gout[name], gref[name], rtol=1e-4, atol=1e-6, msg=name)
        model.eval()   # a forward that fills a cache falls back to transformers' path inside the context
        with torch.no_grad(), fast_mamba_scan():
            cached = model(input_ids=x, use_cache=True).logits
        torch.testing.assert_close(cached, ref, rtol=1e-5, atol=1e-5)


def test_retrain_rule_reproduces_a_direct_training_byte_for_byte(tmp_path):
    """`snakemake retrain_micro` (workflow/rules/micro.smk) trains through the same code path as
    gna.micro.train.train: a model trained directly with the same config is byte-identical,
    and the comparison report says so."""
    import subprocess
    import sys

    import yaml

    model = dict(TINY["llama"])
    cfg = {"seed": 0, "micro": {"world": {"n_eval": 8}, "shipped_dir": "shipped", "shipped_data": "shipped_data",
                                "models": {"m-llama": {"family": "llama", "seed": 2, "model": model,
                                                       "train": TINY_TRAIN}}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "Snakefile").write_text(f'configfile: "config.yaml"\ninclude: "{REPO}/workflow/rules/micro.smk"\n')
    train("llama", model, TINY_TRAIN, tmp_path / "shipped" / "m-llama", seed=2)
    T.write_tasks(tmp_path / "shipped_data", WorldConfig(n_eval=8))
    env = {**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", "Snakefile", "--cores", "1", "retrain_micro"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "results" / "micro" / "compare.json").read_text())
    assert [m["model"] for m in report["models"]] == ["m-llama"]
    assert report["models"][0]["identical"] and report["models"][0]["same_config"], report
    assert report["data"] and all(d["identical"] for d in report["data"]), report["data"]
    assert "| m-llama | yes |" in (tmp_path / "results" / "micro" / "compare.md").read_text()
    assert (tmp_path / "logs" / "micro" / "train" / "m-llama.log").is_file()


def test_table_row_through_lm_eval_and_the_pipeline_loader(tmp_path, monkeypatch):
    """The acceptance table's code path: a trained directory loads with gna.models.load_model
    (offline) and every column is measured through lm-eval on task files."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets", raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    from gna.micro.acceptance_table import micro_table_row, write_kv_sweep

    world = WorldConfig(n_eval=8)
    train("llama", TINY["llama"], TINY_TRAIN, tmp_path / "m", seed=0)
    T.write_tasks(tmp_path / "data", world)
    sweep = write_kv_sweep(tmp_path / "sweep", world, count=8)
    assert sorted(sweep) == [4, 16]
    first = json.loads(Path(sweep[16]).read_text().splitlines()[0])
    assert first["task"] == "micro_kv16" and first["n_pairs"] == 16
    # the sweep rows are among the contexts the training corpus never draws
    assert T.row_fingerprints([first]) <= T.evaluation_fingerprints(build_world(world), kv_count=8)
    row = micro_table_row(tmp_path / "m", tmp_path / "data", tmp_path / "sweep", batch_size=8)
    assert row["model"] == "m" and row["params"] > 0
    for k in ("kv4", "kv8", "kv16", "knowledge", "mmlu", "swde", "lambada", "chain", "arc_regular", "arc_chat"):
        assert 0.0 <= row[k] <= 1.0, (k, row)


def test_the_default_config_plans_the_retrain_of_all_four_shipped_models(tmp_path):
    """`snakemake retrain_micro` with config.yaml: one training job per shipped micro model (from any
    working directory), not part of the default target; a family the trainer lacks is refused."""
    import subprocess
    import sys

    import yaml
    from test_pipeline import planned_jobs

    root = Path(REPO)
    env = {**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}

    def dry(*args, config=root / "config.yaml"):
        return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(root / "Snakefile"), "--directory",
                               str(tmp_path), "--configfile", str(config), "-n", "--cores", "1", *args],
                              env=env, capture_output=True, text=True)

    out = dry("retrain_micro")
    assert out.returncode == 0, out.stderr[-3000:]
    planned = planned_jobs(out)
    assert planned["train_micro_model"] == 4 and planned["micro_tasks"] == 1, out.stdout[-2000:]
    shipped = yaml.safe_load((root / "config.yaml").read_text())["micro"]["models"]
    assert all((root / "data" / "models" / name / "model.safetensors").is_file() for name in shipped)
    assert "train_micro_model" not in dry().stdout   # the default target starts from the shipped models

    cfg = yaml.safe_load((root / "config.yaml").read_text())
    cfg["micro"]["models"]["micro-rwkv"] = {"family": "rwkv"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
    bad = dry("retrain_micro", config=tmp_path / "bad.yaml")
    assert bad.returncode != 0 and "rwkv" in bad.stdout + bad.stderr
