"""The open questions' experiments (gna.questions): head sets ablated together equal the plain
ablation of those heads, pair interactions and the greedy set, probe formats on the same keys and
values, rankings over probe seeds, and the mohawk export parsed back."""
import itertools

import pandas as pd
import pytest
import torch
import yaml

from gna.interventions import ablate_heads
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, score
from gna.questions.head_sets import ablate_sets, margins, set_name
from gna.questions.pairs import greedy_minimal_set, pair_interactions
from gna.scan import scan_heads


@pytest.fixture(scope="module")
def probe(word_tokenizer):
    examples = generate_kv_probe(n_pairs=5, n_examples=12, seed=4, fmt="compact",
                                 key_pool=[f"k{i}" for i in range(20)])
    return encode(examples, word_tokenizer)


def plain(model, probe, heads):
    """The reference: the whole model, the heads ablated by ablate_heads, scored as the scan scores."""
    with ablate_heads(model, heads):
        lp = score(model, probe, batch_size=5).logprobs
    return (lp.argmax(-1).eq(probe.answers).double().mean().item(), margins(lp, probe.answers).mean().item())


@pytest.mark.parametrize("family", ["llama", "mamba2", "zamba2"])
def test_head_sets_equal_plain_ablation(tiny_model, probe, family):
    model, _ = tiny_model(family)
    ranking = scan_heads(model, probe, batch_size=4, progress=False)
    heads = [(int(r.layer), int(r.head), r.kind) for r in ranking.head(4).itertuples()]
    sets = [[h] for h in heads] + [list(p) for p in itertools.combinations(heads, 2)] + [heads[:3]]
    got = ablate_sets(model, probe, sets, batch_size=4, max_rows=10)
    assert len(got) == len(sets) and (got.n_examples == len(probe)).all()
    for s, row in zip(sets, got.itertuples()):
        acc, margin = plain(model, probe, s)
        assert row.heads == set_name(sorted(s))
        assert row.accuracy == pytest.approx(acc, abs=1e-12), s
        assert row.margin == pytest.approx(margin, abs=1e-5), s
    singles = got.iloc[:4].assign(layer=[h[0] for h in heads], head=[h[1] for h in heads])
    ref = ranking.head(4)
    assert singles.accuracy.tolist() == ref.accuracy.tolist()  # a set of one head: the scan's numbers
    assert torch.allclose(torch.tensor(singles.answer_logprob.values), torch.tensor(ref.answer_logprob.values),
                          atol=1e-5)


def test_pair_interactions_and_greedy_set(tiny_model, probe):
    model, _ = tiny_model("llama")
    ranking = scan_heads(model, probe, batch_size=4, progress=False, model_name="m")
    pairs = pair_interactions(model, probe, ranking, top=4, model_name="m", batch_size=4)
    assert len(pairs) == 6 and set(pairs.rank_a) | set(pairs.rank_b) == {1, 2, 3, 4}
    base = ranking.baseline_accuracy[0]
    for r in pairs.itertuples():
        ha, hb = (ranking.iloc[r.rank_a - 1], ranking.iloc[r.rank_b - 1])
        a, b = (int(ha.layer), int(ha["head"]), ha.kind), (int(hb.layer), int(hb["head"]), hb.kind)
        assert r.drop_a == pytest.approx(base - plain(model, probe, [a])[0])
        assert r.drop_ab == pytest.approx(base - plain(model, probe, [a, b])[0])
        assert r.interaction == pytest.approx(r.drop_ab - r.drop_a - r.drop_b)
    greedy = greedy_minimal_set(model, probe, ranking, candidates=6, chance=0.2, margin=0.0, max_size=3,
                                model_name="m", batch_size=4)
    assert list(greedy.step) == list(range(1, len(greedy) + 1)) and len(greedy) <= 3
    # each step's set, ablated plainly, gives the accuracy recorded; no other one-head extension is lower
    for r in greedy.itertuples():
        heads = [tuple(int(x) for x in h[1:].split("H")) + ("attention",) for h in r.greedy_set.split("+")]
        assert r.greedy_accuracy == pytest.approx(plain(model, probe, heads)[0])
    first = greedy.iloc[0]
    singles = ranking.head(6)
    assert first.greedy_accuracy == pytest.approx(singles.accuracy.min())
    assert greedy.reached.tolist() == [a <= 0.2 for a in greedy.greedy_accuracy]
