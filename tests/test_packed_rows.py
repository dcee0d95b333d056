"""Packed rows (one row per example, continuations as branches of a tree) score as separate rows
do: the plain one-forward-per-choice reference, and the head scan's ranking, on attention models."""
from __future__ import annotations

import pytest
import torch

from gna.probes import encode, iter_batches, score
from gna.scan.exact import scan_heads
from test_scoring import probe, reference_logprobs

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run): a 4-D mask's path
FAMILIES = ["llama", "qwen2"]


def branching_probe() -> list[dict]:
    """Choices of one to three tokens that share first tokens (" 4", " 4 2", " 4 2 7", " 4 7"):
    branches of depth two off one another, and a choice that is a prefix of another."""
    examples = probe("multi", n_examples=5)
    for i, ex in enumerate(examples):
        ex["choices"] = [" 4", " 4 2", " 4 2 7", " 4 7", " 9 1 1", " 9"][: len(ex["choices"])]
        ex["answer"] = i % len(ex["choices"])
    return examples


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("make", [lambda: probe("multi"), branching_probe], ids=["multi", "branching"])
def test_packed_matches_reference(tiny_model, word_tokenizer, family, make):
    (model, _), tok = tiny_model(family), word_tokenizer
    examples = make()
    enc = encode(examples, tok, packed=True)
    assert enc.packed and not enc.one_row
    got = score(model, enc, batch_size=3)  # 3 examples a batch: rows of different lengths, padded
    torch.testing.assert_close(got.logprobs, reference_logprobs(model, tok, examples), atol=1e-4, rtol=0)


def test_packed_rows_hold_each_prompt_once(word_tokenizer):
    examples = probe("multi", n_examples=6)
    plain, packed = encode(examples, word_tokenizer), encode(examples, word_tokenizer, packed=True)
    rows = lambda enc: [b.input_ids.shape[0] for b in iter_batches(enc, 30)]  # noqa: E731
    assert rows(packed) == [6] and rows(plain)[0] > 6  # 3 examples a batch of 30 rows unpacked (10 choices)
    tokens = lambda enc: sum(int(b.attention_mask.sum()) for b in iter_batches(enc, 30))  # noqa: E731
    prompts = sum(len(p) for p in packed.prompt_ids)
    assert tokens(packed) < prompts + sum(len(c) for cs in packed.choice_ids for c in cs) < tokens(plain)


def test_one_row_probe_is_not_packed(word_tokenizer):
    assert not encode(probe("single"), word_tokenizer, packed=True).packed


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_head_scan_ranks_as_unpacked(tiny_model, word_tokenizer, family):
    (model, _), tok = tiny_model(family), word_tokenizer
    examples = probe("multi", n_examples=8)
    plain = scan_heads(model, encode(examples, tok), batch_size=40, progress=False, discordant=True)
    packed = scan_heads(model, encode(examples, tok, packed=True), batch_size=4, progress=False, discordant=True)
    key = ["layer", "kind", "head"]
    plain, packed = plain.sort_values(key).reset_index(drop=True), packed.sort_values(key).reset_index(drop=True)
    assert plain.accuracy.tolist() == packed.accuracy.tolist()
    assert plain.discordant.tolist() == packed.discordant.tolist()
    torch.testing.assert_close(torch.tensor(packed.answer_logprob.values), torch.tensor(plain.answer_logprob.values),
                               atol=1e-4, rtol=0)
