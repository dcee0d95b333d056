"""The fast head scan equals the paper's naive loop, head for head."""
import pytest
import torch

from gna.errors import HeadIndexError, ProbeError
from gna.models import describe
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode
from gna.scan import naive_scan_heads, scan_heads, top_k
from gna.scan.ranking import CHANGED

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)


@pytest.fixture(scope="module")
def probe(word_tokenizer):
    examples = generate_kv_probe(n_pairs=5, n_examples=10, seed=3, fmt="compact",
                                 key_pool=[f"k{i}" for i in range(20)])
    return encode(examples, word_tokenizer)


@pytest.mark.parametrize("family,spec", [
    ("llama", {}), ("qwen2", {}), ("mamba2", {}), ("zamba2", {}), ("llamba", {}),
    ("mamba1", {"adapter_options": {"channel_group": 8}}),
])
def test_scan_equals_naive_loop_for_every_head(tiny_model, probe, family, spec):
    model, _ = tiny_model(family, spec=spec)
    fast = scan_heads(model, probe, batch_size=4, max_rows=24, progress=False)
    slow = naive_scan_heads(model, probe)
    joined = fast.merge(slow, on=["layer", "kind", "head"], suffixes=("", "_naive"))
    assert len(joined) == len(fast) == len(slow) == describe(model).n_heads_total
    assert (joined.accuracy == joined.accuracy_naive).all()
    assert torch.allclose(torch.tensor(joined.answer_logprob.values), torch.tensor(joined.answer_logprob_naive.values),
                          atol=1e-5)
    assert (joined["rank"] == joined["rank_naive"]).all()
    assert fast.baseline_accuracy.iloc[0] == slow.baseline_accuracy.iloc[0]


def test_ranking_is_stable_and_tidy(tiny_model, probe):
    model, _ = tiny_model("zamba2")
    a = scan_heads(model, probe, batch_size=3, progress=False, model_name="z")
    b = scan_heads(model, probe, batch_size=10, max_rows=7, progress=False, model_name="z")
    assert a[["layer", "head", "kind", "rank"]].equals(b[["layer", "head", "kind", "rank"]])
    assert list(a.columns[:7]) == ["model", "layer", "head", "kind", "accuracy", "drop", "rank"]
    assert (a["rank"] == range(1, len(a) + 1)).all() and a["drop"].is_monotonic_decreasing
    assert set(a.kind) == {"attention", "mamba2"}
    assert top_k(a, 3) == [(int(r.layer), int(r.head), r.kind) for r in a.head(3).itertuples()]
    assert all(k == "attention" for _, _, k in top_k(a, 2, kinds=["attention"]))


def test_scan_errors(tiny_model, probe, word_tokenizer):
    model, _ = tiny_model("llama")
    with pytest.raises(ProbeError, match="empty"):
        scan_heads(model, encode([], word_tokenizer), progress=False)
    with pytest.raises(Exception, match="layer 7 is out of range"):
        scan_heads(model, probe, layers=[7], progress=False)
    with pytest.raises(HeadIndexError, match="no mixers of kinds"):
        scan_heads(model, probe, kinds=["mamba2"], progress=False)
    ranking = scan_heads(model, probe, progress=False)
    with pytest.raises(HeadIndexError, match="k=9 but the ranking has 8 heads"):
        top_k(ranking, 9)


def test_a_scan_of_chosen_heads_takes_them_as_layer_head_kind_and_keeps_their_numbers(tiny_model, probe):
    """One head order at the scan's interface and inside it: ``heads`` (layer, head, kind) scan those heads
    alone, with the numbers (and discordant counts) the whole scan gives them."""
    model, _ = tiny_model("zamba2")
    every = scan_heads(model, probe, batch_size=4, progress=False, discordant=True)
    chosen = [(int(r.layer), int(r.head), r.kind) for r in every.iloc[[0, -1, len(every) // 2]].itertuples()]
    some = scan_heads(model, probe, batch_size=4, progress=False, heads=chosen, discordant=True)
    assert sorted((int(r.layer), int(r.head), r.kind) for r in some.itertuples()) == sorted(chosen)
    cols = ["layer", "head", "kind", "accuracy", "answer_logprob", "discordant", *CHANGED]
    joined = some[cols].merge(every[cols], on=cols[:3], suffixes=("", "_all"))
    assert len(joined) == len(chosen) and all((joined[c] == joined[c + "_all"]).all() for c in cols[3:])


def test_repeated_forwards_name_their_totals_and_call_intervene_with_state_only_when_prepared(tiny_model, probe):
    from gna.interventions import head_mask
    from gna.scan.repeated_forwards import (ANSWER_LOGPROB, CORRECT, DISCORDANT, MARGIN, item_means,
                                            repeated_forward_scores)
    model, _ = tiny_model("llama")
    calls = []

    def ablate(stack, layer, chunk, x, *state):   # every head of the layer, in every copy
        calls.append(state)
        stack.enter_context(head_mask(model, layer, torch.zeros(x.shape[0], 4, device=x.device), "attention"))

    totals, base = repeated_forward_scores(model, probe, {1: [0]}, 1, ablate, batch_size=5)
    assert calls and all(s == () for s in calls)
    calls.clear()
    prepared, _ = repeated_forward_scores(model, probe, {1: [0]}, 1, ablate, prepare=lambda b, inputs: "mine",
                                          batch_size=5)
    assert calls and all(s == ("mine",) for s in calls) and torch.equal(totals, prepared)
    row = item_means(totals[0], len(probe))
    assert row == dict(accuracy=totals[0, CORRECT].item() / len(probe),
                       answer_logprob=totals[0, ANSWER_LOGPROB].item() / len(probe),
                       margin=totals[0, MARGIN].item() / len(probe), discordant=int(totals[0, DISCORDANT].item()))
