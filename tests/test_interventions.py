"""Interventions: hooks change the computation, never the weights, and undo exactly."""
import copy
from contextlib import ExitStack

import pytest
import torch

from gna.errors import HeadIndexError, InterventionError, LayerIndexError
from gna.interventions import (ablate_heads, capture_layer_inputs, drop_layer, head_mask, keep_heads,
                               start_at_layer, truncate)
from gna.models import adapter_for, describe
from gna.models.tiny import FAMILIES

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

IDS = torch.tensor([[1, 5, 9, 4, 17, 33, 4, 60, 8, 12, 4, 21, 3, 7]])


def logits(model, ids=IDS):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def some_head(model):
    m = describe(model).mixers[-1]
    return (m.layer, m.n_heads - 1, m.kind)


@pytest.mark.parametrize("family", FAMILIES)
def test_ablation_changes_logits_and_restores_bit_identically(tiny_model, family):
    model, _ = tiny_model(family)
    before, weights = logits(model), snapshot(model)
    with ablate_heads(model, [some_head(model)]):
        during = logits(model)
    assert not torch.allclose(before, during)
    assert torch.equal(before, logits(model))
    after = model.state_dict()
    assert all(torch.equal(weights[k], after[k]) for k in weights)


@pytest.mark.parametrize("family", ["llama", "qwen2", "mamba2", "mamba1", "llamba"])
def test_hook_ablation_equals_zeroing_out_proj_columns(tiny_model, family):
    model, _ = tiny_model(family)
    layer, head, kind = some_head(model)
    mixer = describe(model).mixer(layer, kind)
    edited = copy.deepcopy(model)
    cols = slice(head * mixer.head_dim, (head + 1) * mixer.head_dim)
    with torch.no_grad():
        describe(edited).mixer(layer, kind).out_proj.weight[:, cols] = 0
    with ablate_heads(model, [(layer, head)]):
        hooked = logits(model)
    assert torch.allclose(hooked, logits(edited), atol=1e-6)


def test_zamba2_ablates_one_invocation_of_the_shared_block(tiny_model):
    model, _ = tiny_model("zamba2", layers=4)  # hybrid layers 1 and 3 share one attention block
    desc = describe(model)
    a1, a3 = desc.mixer(1, "attention"), desc.mixer(3, "attention")
    assert a1.out_proj.weight is a3.out_proj.weight  # really shared
    base = logits(model)
    entering3 = capture_layer_inputs(model, [3], input_ids=IDS)[3]
    with ablate_heads(model, [(3, 2, "attention")]):
        only3 = logits(model)
        assert torch.equal(capture_layer_inputs(model, [3], input_ids=IDS)[3], entering3)
    assert not torch.allclose(only3, base)
    # Zeroing the shared weight columns ablates the head in both invocations at once.
    edited = copy.deepcopy(model)
    with torch.no_grad():
        describe(edited).mixer(1, "attention").out_proj.weight[:, 2 * a1.head_dim:3 * a1.head_dim] = 0
    with ablate_heads(model, [(1, 2, "attention"), (3, 2, "attention")]):
        both = logits(model)
    assert torch.allclose(both, logits(edited), atol=1e-6)
    assert not torch.allclose(only3, both)
    assert torch.equal(base, logits(model))


@pytest.mark.parametrize("family", FAMILIES)
def test_truncation_equals_slicing_the_layers(tiny_model, family):
    model, _ = tiny_model(family, layers=3)
    sliced = copy.deepcopy(model)
    layers = adapter_for(sliced).layers()
    del layers[2]
    sliced.config.num_hidden_layers = 2
    with truncate(model, 2):
        t = logits(model)
    assert torch.equal(t, logits(sliced))
    assert len(adapter_for(model).layers()) == 3 and not torch.equal(t, logits(model))


@pytest.mark.parametrize("family", ["llama", "mamba2", "mamba1"])
def test_drop_layer_equals_deleting_it(tiny_model, family):
    model, _ = tiny_model(family, layers=3)
    sliced = copy.deepcopy(model)
    del adapter_for(sliced).layers()[1]
    sliced.config.num_hidden_layers = 2
    with drop_layer(model, 1):
        dropped = logits(model)
    assert torch.equal(dropped, logits(sliced))


@pytest.mark.parametrize("family", ["llama", "mamba2", "zamba2", "mamba1"])
def test_start_at_layer_with_cached_inputs_reproduces_the_model(tiny_model, family):
    model, _ = tiny_model(family, layers=3)
    full = logits(model)
    cached = capture_layer_inputs(model, [2], input_ids=IDS)[2]
    with start_at_layer(model, 2, cached):
        resumed = logits(model)
    with start_at_layer(model, 2, torch.zeros_like(cached)):
        assert not torch.allclose(logits(model), full)  # layer 2 really reads the fed state
    assert torch.allclose(resumed, full, atol=1e-6)


@pytest.mark.parametrize("family", ["llama", "zamba2", "mamba1"])
def test_per_sample_head_mask_matches_separate_ablations(tiny_model, family):
    model, _ = tiny_model(family)
    layer, head, kind = some_head(model)
    n = describe(model).mixer(layer, kind).n_heads
    mask = torch.ones(2, n)
    mask[1, head] = 0
    with head_mask(model, layer, mask, kind):
        both = logits(model, IDS.repeat(2, 1))
    with ablate_heads(model, [(layer, head, kind)]):
        ablated = logits(model)
    assert torch.allclose(both[0], logits(model)[0], atol=1e-6)
    assert torch.allclose(both[1], ablated[0], atol=1e-6)


def test_keep_heads_and_mean_ablation(tiny_model):
    model, _ = tiny_model("llama")
    with keep_heads(model, 1, [0, 2]):
        kept = logits(model)
    with ablate_heads(model, [(1, 1), (1, 3)]):
        assert torch.equal(kept, logits(model))
    zeros = {(m.layer, m.kind): torch.zeros(m.n_heads, m.head_dim) for m in describe(model).mixers}
    with ablate_heads(model, [(1, 1)], mode="mean", means=zeros):
        mean0 = logits(model)
    with ablate_heads(model, [(1, 1)]):
        assert torch.equal(mean0, logits(model))


def test_interventions_compose(tiny_model):
    model, _ = tiny_model("llama", layers=3)
    base = logits(model)
    with ExitStack() as stack:
        stack.enter_context(truncate(model, 2))
        stack.enter_context(ablate_heads(model, [(1, 0)]))
        composed = logits(model)
    assert not torch.allclose(composed, base) and torch.equal(base, logits(model))


def test_bad_indices_fail_before_any_compute(tiny_model):
    model, _ = tiny_model("llama")
    calls = []
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    with pytest.raises(HeadIndexError, match="head 4 is out of range"):
        with ablate_heads(model, [(0, 1), (1, 4)]):
            pass
    with pytest.raises(LayerIndexError, match="layer 5 is out of range"):
        with ablate_heads(model, [(5, 0)]):
            pass
    with pytest.raises(LayerIndexError, match="cannot truncate to 0"):
        truncate(model, 0)
    with pytest.raises(LayerIndexError):
        drop_layer(model, -1)
    with pytest.raises(InterventionError, match="mode"):
        with ablate_heads(model, [(0, 0)], mode="resample"):
            pass
    assert calls == [] and not model._forward_hooks and all(
        not m._forward_pre_hooks for m in model.modules() if m is not model)
