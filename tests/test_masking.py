"""Mixing matrices and masked mixers: exact reproduction, exact undo, per-sample masks, G&A masks."""
import copy
import random
import re

import pytest
import torch

from gna.errors import InterventionError, ProbeError
from gna.patterns.ga_masks import aggregate_mask, ga_head_masks, gather_mask, segment_mmlu_prompt, stack_masks
from gna.interventions import ablate_heads
from gna.interventions.masked_mixing import masked_mixers
from gna.patterns.mixing import mamba2_apply, mamba2_terms
from gna.models import describe

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

T = 40  # > 2 chunks of the tiny SSMs (chunk_size 16)


def ids(batch=2, seed=0):
    return torch.randint(5, 100, (batch, T), generator=torch.Generator().manual_seed(seed))


def logits(model, x):
    with torch.no_grad():
        return model(input_ids=x, use_cache=False).logits


def maskable(model):
    return [m for m in describe(model).mixers if m.kind in ("attention", "mamba2", "discrete-mamba2")]


@pytest.mark.parametrize("family", ["mamba2", "zamba2"])
def test_ssd_matrix_reproduces_the_hf_mamba2_mixer(tiny_model, family):
    """y = T x (T materialised, D on the diagonal) reproduces the module over several chunks.
    (Llamba's mixing_matrix: tests/test_llamba.py::test_mixing_matrix_reproduces_mixer.)"""
    model, _ = tiny_model(family)
    mixer = [m for m in describe(model).mixers if m.kind == "mamba2"][-1].module
    mixer = copy.deepcopy(mixer)
    torch.manual_seed(0)
    with torch.no_grad():  # O(1) signals: the 0.02 init makes every error look small
        for p in mixer.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        u = torch.randn(2, 50, mixer.in_proj.in_features)  # 50 steps: four chunks of 16
        x, matrix, gate = mamba2_terms(mixer, u)
        ref = mixer(u)
        out = mamba2_apply(mixer, x, matrix, gate)
    assert matrix.shape == (2, mixer.num_heads, 50, 50) and torch.equal(matrix.triu(1), torch.zeros_like(matrix))
    assert ref.abs().max() > 1 and (out - ref).abs().max() < 1e-4


@pytest.mark.parametrize("family", ["llama", "qwen2", "mamba2", "zamba2", "llamba"])
def test_all_ones_masks_reproduce_the_model_and_undo_exactly(tiny_model, family):
    model, _ = tiny_model(family)
    x = ids()
    before, weights = logits(model, x), {k: v.clone() for k, v in model.state_dict().items()}
    configs = {id(m.module): m.module.config for m in maskable(model) if hasattr(m.module, "config")}
    masks = {(m.layer, m.kind): torch.ones(2, m.n_heads, T, T) for m in maskable(model)}
    with masked_mixers(model, masks):
        during = logits(model, x)
    assert (during - before).abs().max() < 1e-5
    assert torch.equal(logits(model, x), before)
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert all(m.module.config is configs[id(m.module)] for m in maskable(model) if id(m.module) in configs)


@pytest.mark.parametrize("family,kind", [("llama", "attention"), ("qwen2", "attention"),
                                         ("zamba2", "attention"), ("llamba", "discrete-mamba2")])
def test_zero_mask_on_a_head_equals_ablating_it(tiny_model, family, kind):
    """Attention: zero weights give a zero head output. Llamba: y_h = 0 before the gate, which
    is multiplicative per channel, so the out_proj input of head h is zero."""
    model, _ = tiny_model(family)
    mixer = [m for m in maskable(model) if m.kind == kind][-1]
    mask = torch.ones(1, mixer.n_heads, T, T)
    mask[:, 1] = 0
    with masked_mixers(model, {(mixer.layer, kind): mask}):
        masked = logits(model, ids())
    with ablate_heads(model, [(mixer.layer, 1, kind)]):
        ablated = logits(model, ids())
    assert not torch.allclose(masked, logits(model, ids()), atol=1e-4)
    assert torch.allclose(masked, ablated, atol=1e-6)


def test_zero_mask_on_a_mamba2_head_equals_ablating_it_not_silencing_its_input(tiny_model):
    """The gated norm spans every head (n_groups = 1). A zero mask on head h takes the norm's
    statistics from the unmasked output, so it equals zeroing h's slice of the out_proj input
    (the head's effect stays local), not silencing h's x channels at the conv, which would
    rescale the other heads through the shared norm (the confound the earlier form had)."""
    model, _ = tiny_model("mamba2")
    mixer = describe(model).mixers[-1]
    edited = copy.deepcopy(model)
    conv = describe(edited).mixers[-1].module.conv1d
    with torch.no_grad():
        rows = slice(1 * mixer.head_dim, 2 * mixer.head_dim)  # x comes first in xBC
        conv.weight[rows] = 0
        conv.bias[rows] = 0
    mask = torch.ones(1, mixer.n_heads, T, T)
    mask[:, 1] = 0
    with masked_mixers(model, {(mixer.layer, "mamba2"): mask}):
        masked = logits(model, ids())
    with ablate_heads(model, [(mixer.layer, 1, "mamba2")]):
        ablated = logits(model, ids())
    assert not torch.allclose(masked, logits(model, ids()), atol=1e-4)
    assert torch.allclose(masked, ablated, atol=1e-5)
    assert not torch.allclose(masked, logits(edited, ids()), atol=1e-4)


@pytest.mark.parametrize("family", ["qwen2", "mamba2", "llamba"])
def test_each_sample_uses_its_own_mask(tiny_model, family):
    model, _ = tiny_model(family)
    mixer = maskable(model)[-1]
    g = torch.Generator().manual_seed(1)
    masks = (torch.rand(2, mixer.n_heads, T, T, generator=g) > 0.3).float()
    x = ids()
    key = (mixer.layer, mixer.kind)
    with masked_mixers(model, {key: masks}) as handle:
        both = logits(model, x)
        alone = []
        for b in range(2):
            handle.update({key: masks[b:b + 1]})
            alone.append(logits(model, x[b:b + 1]))
    assert torch.allclose(both, torch.cat(alone), atol=1e-5)
    assert not torch.allclose(alone[0], logits(model, x[:1]), atol=1e-4)


def test_zamba2_masks_one_invocation_of_the_shared_block(tiny_model):
    model, _ = tiny_model("zamba2", layers=4)  # hybrid layers 1 and 3 share one attention block
    n = describe(model).mixer(1, "attention").n_heads
    zero = torch.ones(1, n, T, T)
    zero[:, 0] = 0
    ones = torch.ones(1, n, T, T)
    with masked_mixers(model, {(1, "attention"): zero, (3, "attention"): ones}):
        first = logits(model, ids())
    with ablate_heads(model, [(1, 0, "attention")]):
        ablated = logits(model, ids())
    with masked_mixers(model, {(3, "attention"): zero}):
        third = logits(model, ids())
    assert torch.allclose(first, ablated, atol=1e-6) and not torch.allclose(first, third, atol=1e-4)


def test_bad_masks_are_refused(tiny_model):
    model, _ = tiny_model("llama")
    with pytest.raises(InterventionError, match=r"\(batch, 4, T, T\)"):
        with masked_mixers(model, {(0, "attention"): torch.ones(1, 3, T, T)}):
            pass
    with pytest.raises(InterventionError, match="does not fit"):
        with masked_mixers(model, {(0, "attention"): torch.ones(1, 4, T - 1, T - 1)}):
            logits(model, ids())
    mamba1, _ = tiny_model("mamba1")
    with pytest.raises(InterventionError, match="cannot mask a mamba1"):
        with masked_mixers(mamba1, {(0, "mamba1"): torch.ones(1, describe(mamba1).mixers[0].n_heads, T, T)}):
            pass


# ----------------------------------------------------------------------------- G&A masks

@pytest.fixture(scope="module")
def micro_mmlu():
    from gna.micro import tasks
    from gna.micro.tokenizer import word_level_tokenizer
    from gna.micro.world import WorldConfig, build_world
    world = build_world(WorldConfig(n_eval=8))
    row = tasks.gen_mmlu(world, random.Random(0))[0]
    return row, word_level_tokenizer(tasks.micro_vocabulary(world))


def test_ga_masks_on_a_micro_mmlu_prompt(micro_mmlu):
    row, tok = micro_mmlu
    prompt = row["prompt"]            # "r3 e17\nA 8\nB 42\nC 3\nD 77\nAnswer:"
    enc = tok(prompt + row["choices"][0], return_offsets_mapping=True)  # a continuation follows
    seg = segment_mmlu_prompt(prompt, enc["offset_mapping"])
    words = tok.convert_ids_to_tokens(enc["input_ids"])
    assert seg.letters == ["A", "B", "C", "D"] and words[seg.final] == "Answer:"
    for letter, toks, summary in zip(seg.letters, seg.choices, seg.summaries):
        assert [words[t] for t in toks][0] == letter and len(toks) == 3 and toks[-1] == summary
        assert words[summary] == "\n"
    n = len(enc["input_ids"])
    g, a = gather_mask(seg, n), aggregate_mask(seg, n)
    inside = {(t, s) for toks in seg.choices for t in toks for s in toks if s <= t}
    assert {tuple(p) for p in g.nonzero().tolist()} == inside
    assert {tuple(p) for p in a.nonzero().tolist()} == {(seg.final, s) for s in seg.summaries}
    assert torch.equal(gather_mask(seg, n, keep_diagonal=True).diagonal(), torch.ones(n))
    m = ga_head_masks(seg, n, 4, {1: "gather", 2: "aggregate"}, "pattern")
    assert torch.equal(m[0, 1], g) and torch.equal(m[0, 2], a) and torch.equal(m[0, 0], torch.ones(n, n))
    assert ga_head_masks(seg, n, 4, {1: "gather"}, "full")[0, 1].sum() == 0
    assert ga_head_masks(None, n, 4, {1: "gather"}, "pattern")[0, 1].sum() == 0  # no choices: fully masked
    assert ga_head_masks(seg, n, 4, {1: "gather"}, "none").min() == 1
    batch = stack_masks([m, m[..., :n - 2, :n - 2]], n)
    assert batch.shape == (2, 4, n, n) and torch.equal(batch[1, 1, :n - 2, :n - 2], g[:n - 2, :n - 2])
    assert batch[1, 1, n - 1].min() == 1  # padding rows: ones


def char_tokens(text):
    """Offsets of a whitespace-and-newline tokenizer (BPE-like spans, the newline on its own)."""
    return [(m.start(), m.end()) for m in re.finditer(r"\n| ?[^\s]+", text)]


def test_segments_of_the_paper_mmlu_format():
    prompt = "A network uses which protocol?\nA. WPA\nB. WEP\nC) TKIP\nD: AES\nAnswer:"
    seg = segment_mmlu_prompt(prompt, char_tokens(prompt))
    spans = char_tokens(prompt)
    assert seg.letters == list("ABCD")  # the question line starting with "A " is not a choice
    assert [prompt[slice(*spans[s])] for s in seg.summaries] == ["\n"] * 4
    assert [prompt[spans[t][0]:spans[t][1]] for t in seg.choices[0]] == ["A.", " WPA", "\n"]
    with pytest.raises(ProbeError, match="not choices"):
        segment_mmlu_prompt("Q\nB. x\nC. y\nAnswer:", char_tokens("Q\nB. x\nC. y\nAnswer:"))
    with pytest.raises(ProbeError, match="no 'Answer'"):
        segment_mmlu_prompt("Q\nA. x", char_tokens("Q\nA. x"))
