"""The batched scorer equals a plain one-forward-per-choice reference, for every path and family."""
from __future__ import annotations

import pytest
import torch

from gna.errors import ProbeError
from gna.probes import batch_choice_logprobs, encode, generate_kv_probe, iter_batches, score

KEYS = [f"k{i}" for i in range(20)]  # the keys in the test vocabulary


def reference_logprobs(model, tok, examples) -> torch.Tensor:
    """(N, C): for each example and choice, one unpadded forward of prompt + continuation alone,
    split as lm-eval splits it (encode the whole text, cut at the prompt's token count)."""
    out = []
    for ex in examples:
        ctx = ex["prompt"].rstrip()
        ctx_ids = tok(ctx)["input_ids"]
        row = []
        for choice in ex["choices"]:
            cont = tok(ex["prompt"] + choice)["input_ids"][len(ctx_ids):]
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ctx_ids + cont])).logits[0]
            lp = logits.float().log_softmax(-1)
            row.append(sum(lp[len(ctx_ids) - 1 + j, t].item() for j, t in enumerate(cont)))
        out.append(row)
    return torch.tensor(out, dtype=torch.float64)


def probe(kind: str, n_examples: int = 4, n_pairs: int = 6, seed: int = 0) -> list[dict]:
    """Compact-format examples whose prompts have different lengths (0-2 filler words), so a
    batch is padded. ``kind``: "single" (choices " 42"), "prefix" (" A 42": shared prefix plus one
    token, still one row per example) or "multi" (" 4 2" / " 7": one row per choice)."""
    examples = generate_kv_probe(n_pairs, n_examples, seed, fmt="compact", key_pool=KEYS)
    for i, ex in enumerate(examples):
        ex["prompt"] = "the " * (i % 3) + ex["prompt"]
        values = [c.strip() for c in ex["choices"]]
        if kind == "prefix":
            ex["choices"] = [" A " + v for v in values]
        elif kind == "multi":
            ex["choices"] = [" " + " ".join(v) for v in values]  # "42" -> "4 2": one or two tokens
            del ex["n_pairs"]  # " 4" and " 4 2", as a benchmark's may: gna.probes.values refuses them in a KV probe
    return examples


PATHS = {"single": (True, True), "prefix": (False, True), "multi": (False, False)}  # single_token, one_row


@pytest.mark.parametrize("family", ["llama", "qwen2", "mamba1", "mamba2", "zamba2"])
@pytest.mark.parametrize("kind", list(PATHS))
def test_matches_reference(tiny_model, word_tokenizer, family, kind):
    # The test tokenizer itself: the loader's AutoTokenizer gives Qwen2 a Qwen2Tokenizer instead.
    (model, _), tok = tiny_model(family), word_tokenizer
    examples = probe(kind)
    enc = encode(examples, tok)
    assert (enc.single_token, enc.one_row) == PATHS[kind]
    got = score(model, enc, batch_size=16)
    ref = reference_logprobs(model, tok, examples)
    torch.testing.assert_close(got.logprobs, ref, atol=1e-4, rtol=0)
    assert torch.equal(got.correct, ref.argmax(-1) == got.answers)
    assert got.accuracy == (ref.argmax(-1) == got.answers).double().mean().item()


@pytest.mark.parametrize("family", ["llama", "mamba2", "zamba2"])
@pytest.mark.parametrize("kind", ["single", "multi"])
def test_batch_size_invariance(tiny_model, word_tokenizer, family, kind):
    (model, _), tok = tiny_model(family), word_tokenizer
    enc = encode(probe(kind, n_examples=6), tok)
    # Prompts of different lengths share a batch: padding really happens.
    assert any((b.attention_mask == 0).any() for b in iter_batches(enc, 16))
    results = [score(model, enc, batch_size=bs).logprobs for bs in (1, 3, 16)]
    for r in results[1:]:
        torch.testing.assert_close(r, results[0], atol=1e-5, rtol=0)


def test_forward_override_and_leading_dims(tiny_model):
    """A custom forward returning full logits gives the default path's numbers (which keeps only
    the positions read); logits with a leading ablation axis give one score table per slice."""
    model, tok = tiny_model("llama")
    enc = encode(probe("multi"), tok)
    default = score(model, enc, batch_size=8)
    custom = score(model, enc, batch_size=8, forward=lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits)
    torch.testing.assert_close(custom.logprobs, default.logprobs, atol=1e-6, rtol=0)
    batch = next(iter_batches(enc, 8))
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    stacked = batch_choice_logprobs(torch.stack([logits, logits * 0]), batch)  # (2, E, C)
    assert stacked.shape == (2, len(batch.examples), enc.n_choices)
    torch.testing.assert_close(stacked[0], default.logprobs[batch.examples])
    assert torch.allclose(stacked[1], stacked[1][0, 0])  # uniform logits: every choice equal


def test_empty_probe_set_raises(word_tokenizer):
    with pytest.raises(ProbeError, match="empty"):
        encode([], word_tokenizer, name="kv n=10")


@pytest.mark.parametrize("bad, message", [
    ({"answer": 6}, "answer 6"), ({"answer": -1}, "answer -1"), ({"answer": "1"}, "answer '1'"),
    ({"choices": []}, "no choices"), ({"choices": [" 1", " 2"], "answer": 0}, "2 choices"),
])
def test_bad_example_raises_naming_it(word_tokenizer, bad, message):
    examples = probe("single")
    examples[2].update(bad)
    with pytest.raises(ProbeError, match=message) as err:
        encode(examples, word_tokenizer)
    assert examples[2]["id"] in str(err.value)
