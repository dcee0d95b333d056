"""Cached generation for Llamba and the hybrid students: the same tokens as recomputing the prefix, O(1) steps.

lm-eval's generate_until calls ``model.generate(..., use_cache=True)``; these models then carry a
``LlambaCache`` (conv window + SSM state per layer, K/V of the kept attention heads) from step to step.
"""
import pytest
import torch

from gna.hybrid.student import build_student
from gna.interventions import ablate_heads
from gna.models.llamba import LlambaCache, LlambaConfig, LlambaForCausalLM
from gna.models.tiny import build_tiny_model, strengthen_llamba_mixers

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

torch.set_num_threads(1)
N_NEW = 40  # greedy tokens compared


def tiny_llamba(seed=0, **kw):
    torch.manual_seed(seed)
    model = LlambaForCausalLM(LlambaConfig.tiny(vocab_size=100, **kw)).eval()
    return strengthen_llamba_mixers(model)   # O(1) mixer signals: a wrong state would show


def tiny_hybrid(attn_implementation="eager", combine="sum"):
    teacher = build_tiny_model("llama", num_key_value_heads=2, vocab_size=100)
    student = build_student(teacher, [(0, 1), (1, 2), (1, 0)], 8, chunk_size=16, combine=combine, seed=1).eval()
    student.set_attn_implementation(attn_implementation)
    return student


def prompts(vocab=100):
    """Two prompts of 13 and 10 tokens, the second left-padded (as lm-eval pads for generation)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (2, 13), generator=g)
    am = torch.ones_like(ids)
    ids[1, :3], am[1, :3] = 0, 0
    return ids, am


def generate(model, use_cache, ids, am, n=N_NEW):
    out = model.generate(ids, attention_mask=am, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         use_cache=use_cache, pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    return out.sequences, torch.stack(out.scores, 1)


def forward_lengths(model):
    """Record the sequence length each backbone forward sees."""
    seen = []
    handle = model.backbone.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append((args[0] if args else kwargs["input_ids"]).shape[1]), with_kwargs=True)
    return seen, handle


@pytest.mark.parametrize("make", [
    tiny_llamba, lambda: tiny_llamba(ssm_cfg=dict(n_qk_heads=2, activation="silu")),
    tiny_hybrid, lambda: tiny_hybrid("sdpa"), lambda: tiny_hybrid(combine="adapter")],
    ids=["llamba", "llamba-grouped-silu", "hybrid-eager", "hybrid-sdpa", "hybrid-adapter"])
def test_cached_generation_equals_recomputing_and_feeds_one_token(make):
    model = make()
    ids, am = prompts()
    ref, ref_scores = generate(model, False, ids, am)
    seen, handle = forward_lengths(model)
    try:
        out, scores = generate(model, True, ids, am)
    finally:
        handle.remove()
    assert torch.equal(out, ref)
    finite = torch.isfinite(ref_scores)  # min_new_tokens sets the EOS score to -inf
    assert torch.equal(finite, torch.isfinite(scores)) and (scores - ref_scores)[finite].abs().max() < 1e-4
    # the prompt once, then one token per step: the cached path really ran
    assert seen == [ids.shape[1]] + [1] * (N_NEW - 1)
    assert len(set(out[0, 13:].tolist())) > 3  # not a degenerate repetition that any state would give


@pytest.mark.parametrize("name", ["cache", "cache_params"])
def test_cache_continues_a_forward_exactly(name):
    """Prefill k tokens, then feed the rest in pieces of 1 and 3: the logits of the full forward.
    The cache is taken under transformers' name from 5.24 (``cache``) and the one before it."""
    model = tiny_hybrid()
    ids, am = prompts()
    with torch.no_grad():
        full = model(ids, attention_mask=am).logits
        cache = LlambaCache()
        parts = [model(ids[:, :6], attention_mask=am[:, :6], **{name: cache}).logits]
        assert cache.seen == 6 and cache.ssm[0].shape == (2, 4, 8, 8) and cache.keys[1].shape == (2, 2, 6, 8)
        parts.append(model(ids[:, 6:7], attention_mask=am[:, :7], **{name: cache}).logits)
        parts.append(model(ids[:, 7:10], attention_mask=am[:, :10], **{name: cache}).logits)
        parts.append(model(ids[:, 10:], attention_mask=am, **{name: cache}).logits)
    stepped = torch.cat(parts, 1)
    assert (stepped - full)[am.bool()].abs().max() < 1e-5


def test_interventions_with_the_cache():
    """A head ablation (out_proj pre-hook) acts per token: cached and uncached agree under it;
    a replaced layer or a standing mixing mask would ignore the cache, so generate recomputes."""
    model = tiny_llamba()
    ids, am = prompts()
    with ablate_heads(model, [(0, 1), (1, 3)]):
        ablated, _ = generate(model, False, ids, am, n=12)
        assert torch.equal(generate(model, True, ids, am, n=12)[0], ablated)
    assert not torch.equal(generate(model, True, ids, am, n=12)[0], ablated)
    mixer = model.backbone.layers[0].mixer
    mixer.mixing_mask = torch.ones(2, mixer.n_heads, 13, 13)
    try:
        assert not model.backbone.supports_cache()
        with pytest.raises(ValueError, match="use_cache=False"):
            model(ids, cache_params=LlambaCache())
    finally:
        mixer.mixing_mask = None
    assert model.backbone.supports_cache()


def test_the_output_carries_the_cache_where_generate_reads_it():
    """generate takes the next step's cache from the output under one of ALL_CACHE_NAMES (``cache``
    from transformers 5.24, ``cache_params`` before); building that output must not fail either."""
    from transformers.generation.utils import ALL_CACHE_NAMES
    for model in (tiny_llamba(), tiny_hybrid()):
        ids, am = prompts()
        with torch.no_grad():
            out = model(ids, attention_mask=am, use_cache=True)
        carried = [out[n] for n in ALL_CACHE_NAMES if n in out]
        assert len(carried) == 1 and isinstance(carried[0], LlambaCache) and carried[0].seen == ids.shape[1]
    with pytest.raises(ValueError, match="not both"):
        model(ids, cache=LlambaCache(), cache_params=LlambaCache())


def test_beam_search_reorders_the_cache():
    model = tiny_llamba()
    ids, am = prompts()
    kw = dict(attention_mask=am, max_new_tokens=8, num_beams=3, do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(ids, use_cache=True, **kw), model.generate(ids, use_cache=False, **kw))
