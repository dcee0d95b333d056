"""Distillation tokens prepared once (rule distill_tokens) and read offline: shard files that a
resumed stage reads from its own step, a held-out split disjoint from training, and the paper
DAG preparing each mix once."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from gna.config.schema import with_defaults
from gna.errors import ConfigError
from gna.hybrid.study import web_stream as W
from gna.hybrid.study.data import make_stream
from gna.hybrid.study.token_sets import token_sets, tokens_of
from gna.hybrid.study.token_shards import INDEX, TokenShards, write_token_shards

ROOT = Path(__file__).resolve().parents[1]


def batches(n_batches, batch=3, seq_len=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(0, 130_000, (batch, seq_len), generator=g)} for _ in range(n_batches)]


def test_shards_give_back_the_stream_rows_batch_by_batch_across_shard_files(tmp_path):
    src = batches(7)  # 21 rows
    index = write_token_shards(iter(src), tmp_path / "t", rows=20, rows_per_shard=6, progress=False)
    assert index["rows"] == 20 and [s["rows"] for s in index["shards"]] == [6, 6, 6, 2]
    assert json.loads((tmp_path / "t" / INDEX).read_text()) == index
    rows = torch.cat([b["input_ids"] for b in src])[:20]
    shards = TokenShards(tmp_path / "t", batch_size=4)
    assert shards.steps == 5
    for step in range(5):  # random access: step 3 needs nothing read before it (a resumed stage)
        got = shards(step)["input_ids"]
        assert got.dtype == torch.int64 and torch.equal(got, rows[4 * step: 4 * step + 4])
    with pytest.raises(IndexError, match="more steps than its tokens were prepared for"):
        shards(5)


def test_a_stream_that_ends_early_or_fails_leaves_no_folder(tmp_path):
    with pytest.raises(ConfigError, match="ended after 6 rows; 10 were asked for"):
        write_token_shards(iter(batches(2)), tmp_path / "short", rows=10, progress=False)

    def failing():
        yield from batches(2)
        raise OSError("connection reset")

    with pytest.raises(OSError):
        write_token_shards(failing(), tmp_path / "broken", rows=10, rows_per_shard=2, progress=False)
    assert not any(tmp_path.iterdir())
    with pytest.raises(FileNotFoundError, match="distill_tokens"):
        TokenShards(tmp_path / "short", 2)


@pytest.fixture
def tok():
    from gna.models.loading import load_tokenizer
    from gna.models import ModelSpec

    return load_tokenizer(ModelSpec.from_dict({"path": str(ROOT / "data/models/micro-llama")}))


@pytest.fixture
def local_sources(tmp_path):
    """Two local JSON-lines "data sets" read through datasets' streaming loader, as the Hub's are."""
    words = ["k1", "k2", "3", "4", "r0", "e0", "w1", "w2", "w3"]
    out = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"text": f"{name} " + " ".join(words[(i + j) % 9] for j in range(i % 7 + 1))})
                                + "\n" for i in range(400)))
        out.append({"path": "json", "data_files": str(path), "weight": 1})
    return out


def test_heldout_documents_never_reach_training_rows(tok, local_sources, monkeypatch):
    monkeypatch.setattr(W, "HELDOUT_EVERY", 5)  # 1 in 5 documents held out, so both splits are large
    train = list(W.WebStream(tok, local_sources, seq_len=16, batch_size=4, mixing="round_robin")._documents())
    held = list(W.WebStream(tok, local_sources, seq_len=16, batch_size=4, mixing="round_robin",
                            split="heldout")._documents())
    assert 100 < len(held) < 300 and len(train) + len(held) == 800
    assert not set(train) & set(held) and all(W.is_heldout(t) for t in held)


def test_prepared_tokens_equal_the_stream_and_feed_make_stream(tok, local_sources, tmp_path):
    data = {"source": "web", "seq_len": 16, "batch_size": 4, "mixing": "round_robin", "sources": local_sources}
    stream = W.WebStream(tok, local_sources, seq_len=16, batch_size=4, mixing="round_robin")
    direct = [b["input_ids"] for _, b in zip(range(5), stream)]
    write_token_shards(W.WebStream(tok, local_sources, seq_len=16, batch_size=64, mixing="round_robin"),
                       tmp_path / "train", rows=20, rows_per_shard=8, progress=False)
    read = make_stream(data, tok, None, shards=str(tmp_path / "train"))
    assert all(torch.equal(read(i)["input_ids"], direct[i]) for i in range(5))
    with pytest.raises(ConfigError, match="seq_len"):
        make_stream({**data, "seq_len": 32}, tok, None, shards=str(tmp_path / "train"))


def paper_config():
    return with_defaults(yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text()))


def test_the_paper_preset_prepares_each_mix_once_with_the_rows_of_its_longest_reader():
    sets = token_sets(paper_config())
    by_reader = {r: p for p, e in sets.items() for r in e["readers"]}
    assert set(by_reader) == {"stage1", "stage2", "stage3", "heldout"}  # layer swap: a given student
    assert by_reader["stage2"] == by_reader["stage3"] != by_reader["stage1"]  # mohawk: stage 1 its own mix
    assert sets[by_reader["stage3"]]["rows"] == 76_294 * 128  # ceil(2e10 / (128 x 2048)) steps x 128 rows (stage 2: fewer)
    assert sets[by_reader["stage1"]]["rows"] == 146_496  # ceil(3e8 / (64 x 2048)) steps x 64
    assert sets[by_reader["heldout"]]["rows"] == 16 * 32 and sets[by_reader["heldout"]]["split"] == "heldout"
    assert tokens_of(sets, "stage2") == [by_reader["stage2"]] and tokens_of(sets, "align") == []
    micro = with_defaults(yaml.safe_load((ROOT / "config.yaml").read_text()))
    assert token_sets(micro) == {}


def test_the_paper_dag_tokenizes_before_distilling():
    from gna.plan import dag_jobs

    jobs = dag_jobs(paper_config())
    tokens = [wc for rule, wc in jobs if rule == "distill_tokens"]
    assert len(tokens) == 3 and all(wc["teacher"] == "llama-1b" for wc in tokens)
    assert sorted(wc["name"].split("-")[0] for wc in tokens) == ["heldout", "train", "train"]
