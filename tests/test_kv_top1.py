"""mohawk's KV-Ret metric: the top-1 next token over the whole vocabulary at the answer position."""
from pathlib import Path

import pytest
import torch
from torch import nn

from gna.models import load_model
from gna.probes import generate_kv_probe
from gna.probes.top1 import answer_texts, kv_top1, kv_top1_hits

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def micro():
    return load_model({"path": str(ROOT / "data/models/micro-llama")})


def test_top1_is_the_argmax_at_the_answer_position_whatever_the_batch(micro):
    model, tok = micro
    examples = generate_kv_probe(8, 24, seed=5, fmt="compact", separator=" ")
    hits = kv_top1_hits(model, tok, examples, batch_size=7)     # ragged, right-padded batches
    assert hits == kv_top1_hits(model, tok, examples, batch_size=1)
    with torch.no_grad():
        for ex, hit in zip(examples, hits):        # one text at a time, no padding: the same verdict
            ids = torch.tensor([tok(ex["prompt"] + ex["choices"][ex["answer"]])["input_ids"]])
            assert hit == bool(model(ids).logits[0, -2].argmax() == ids[0, -1])
    assert kv_top1(model, tok, examples) == pytest.approx(sum(hits) / len(hits))
    assert 0.5 < kv_top1(model, tok, examples) <= 1.0                    # the micro model retrieves
    assert answer_texts(examples[:1])[0].endswith(" " + examples[0]["choices"][examples[0]["answer"]].strip())


class FavouriteToken(nn.Module):
    """Puts the answer value second at every position, behind one token that is no value at all:
    a multiple choice over the values would always be right, a top-1 over the vocabulary never."""

    def __init__(self, vocab: int, favourite: int, values: list[int]):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))
        self.vocab, self.favourite, self.values = vocab, favourite, values

    def forward(self, input_ids, use_cache=False):
        logits = torch.zeros(*input_ids.shape, self.vocab)
        logits[..., self.values] = 1.0
        logits[..., self.favourite] = 2.0
        return type("Out", (), {"logits": logits})()


def test_a_token_outside_the_values_is_a_miss_for_top1(micro):
    _, tok = micro
    examples = generate_kv_probe(4, 6, seed=1, fmt="compact", separator=" ")
    values = sorted({tok(c, add_special_tokens=False)["input_ids"][-1] for ex in examples for c in ex["choices"]})
    favourite = next(i for i in range(len(tok)) if i not in values)
    assert kv_top1(FavouriteToken(len(tok), favourite, values), tok, examples) == 0.0
    ans = tok(examples[0]["choices"][examples[0]["answer"]], add_special_tokens=False)["input_ids"][-1]
    assert kv_top1(FavouriteToken(len(tok), ans, values), tok, examples[:1]) == 1.0
