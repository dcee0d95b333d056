"""The further transformers families (Jamba, Falcon-H1, GraniteMoeHybrid, GPT-2, OLMo, OLMo-2, Phi):
described head for head, ablated exactly and reversibly, scanned fast == naive; what is not
understood is refused by name.

Each model is a tiny random-init one, saved with ``save_pretrained`` and reloaded through
``gna.models.load_model`` (the ``tiny_model`` fixture), like a Hugging Face checkpoint.
"""
import copy

import pytest
import torch
import transformers as tf

from gna.config.checks import structure
from gna.errors import UnknownArchitectureError
from gna.interventions import ablate_heads, capture_layer_inputs, start_at_layer, truncate
from gna.patterns.mixing import mamba2_apply, mamba2_terms
from gna.models import adapter_for, attach_adapter, describe, load_model
from gna.models.adapters.attention import AttentionAdapter
from gna.models.tiny import ALL_FAMILIES, MORE_FAMILIES, build_tiny_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode
from gna.scan import naive_scan_heads, scan_heads

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

IDS = torch.tensor([[1, 5, 9, 4, 17, 33, 4, 60, 8, 12, 4, 21, 3, 7]])
ATT = ("attention", 4, 8)  # (kind, heads, head_dim) of the tiny attention mixers: hidden 32, 4 heads

# family -> (adapter family, mixers of layer 0, mixers of layer 1), each mixer (kind, n_heads, head_dim)
EXPECTED = {
    "jamba": ("jamba", [("mamba1", 64, 1)], [ATT]),                     # Mamba inner width 2 x 32, per channel
    "falcon-h1": ("falcon-h1", [ATT, ("mamba2", 8, 8)], [ATT, ("mamba2", 8, 8)]),  # both mixers in every layer
    "granitemoehybrid": ("granitemoehybrid", [("mamba2", 8, 8)], [ATT]),
    "gpt2": ("gpt2", [ATT], [ATT]),
    "olmo": ("attention", [ATT], [ATT]),
    "olmo2": ("attention", [ATT], [ATT]),
    "phi": ("phi", [ATT], [ATT]),
    "bamba": ("bamba", [("mamba2", 8, 8)], [ATT]),            # Mamba-2 layer 0, attention layer 1
    "nemotron-h": ("nemotron-h", [("mamba2", 8, 8)], [ATT]),  # blocks: Mamba-2, attention (MLP blocks from 3 on)
}
# Jamba's Mamba layers in groups of 16 channels (4 heads), to keep the naive scan short.
SCAN_SPEC = {"jamba": {"adapter_options": {"channel_group": 16}}}


def logits(model, ids=IDS):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def in_width(proj) -> int:
    """Input width of an output projection: nn.Linear (out, in); GPT-2's Conv1D (in, out)."""
    return proj.in_features if isinstance(proj, torch.nn.Linear) else proj.weight.shape[0]


def last_head_of_each_mixer(model):
    return [(m.layer, m.n_heads - 1, m.kind) for m in describe(model).mixers]


def test_every_new_family_has_a_tiny_model_and_an_expectation():
    assert set(EXPECTED) == set(MORE_FAMILIES)


@pytest.mark.parametrize("family", MORE_FAMILIES)
def test_describes_every_token_mixer_with_its_heads(tiny_model, family):
    model, _ = tiny_model(family)
    desc = describe(model)
    fam, layer0, layer1 = EXPECTED[family]
    assert desc.family == fam and desc.n_layers == 2
    for layer, want in ((0, layer0), (1, layer1)):
        assert [(m.kind, m.n_heads, m.head_dim) for m in desc.mixers_in(layer)] == want
    cfg = model.config
    for m in desc.mixers:
        assert model.get_submodule(m.out_proj_path) is m.out_proj
        assert m.n_heads * m.head_dim == in_width(m.out_proj)  # the head slices tile the projection input
        if m.kind == "attention":
            kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
            assert m.kv_heads == kv and m.n_heads % m.kv_heads == 0
    # Nothing that mixes tokens is left out: every attention or SSM module in a layer is a described mixer.
    layers = adapter_for(model).layers()
    for i, layer in enumerate(layers):
        found = {id(mod) for mod in layer.modules()
                 if type(mod).__name__.endswith("Attention") or "A_log" in dict(mod.named_parameters(recurse=False))}
        assert found == {id(m.module) for m in desc.mixers_in(i)}, f"layer {i}"


@pytest.mark.parametrize("family", ALL_FAMILIES)
@pytest.mark.parametrize("shape", [{}, {"layers": 3, "hidden": 64, "heads": 2}])
def test_config_check_counts_the_heads_the_adapter_describes(tiny_model_dir, tiny_model, family, shape):
    """``gna.config.checks.structure`` (k <= heads checks, before any job) reads config.json alone,
    through the family's adapter: the same numbers as the loaded model's description."""
    spec = SCAN_SPEC.get(family, {})
    model, _ = tiny_model(family, spec=spec, **shape)
    d = tiny_model_dir(family, **shape)
    want = (shape.get("layers", 2), describe(model).n_heads_total)
    assert structure({"path": d, **spec}, d, family) == want
    assert type(adapter_for(model)).structure(model.config.to_dict(), **spec.get("adapter_options", {})) == want


@pytest.mark.parametrize("family", MORE_FAMILIES)
def test_ablation_changes_logits_and_restores_bit_identically(tiny_model, family):
    model, _ = tiny_model(family)
    before = logits(model)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    for ref in last_head_of_each_mixer(model):  # every mixer kind of every layer
        with ablate_heads(model, [ref]):
            during = logits(model)
        assert not torch.allclose(before, during), ref
        assert torch.equal(before, logits(model)), ref
    after = model.state_dict()
    assert weights.keys() == after.keys() and all(torch.equal(weights[k], after[k]) for k in weights)


@pytest.mark.parametrize("family", MORE_FAMILIES)
def test_hook_ablation_equals_zeroing_the_output_projection_weights(tiny_model, family):
    model, _ = tiny_model(family)
    for layer, head, kind in last_head_of_each_mixer(model):
        mixer = describe(model).mixer(layer, kind)
        sl = slice(head * mixer.head_dim, (head + 1) * mixer.head_dim)
        edited = copy.deepcopy(model)
        proj = describe(edited).mixer(layer, kind).out_proj
        with torch.no_grad():
            if isinstance(proj, torch.nn.Linear):
                proj.weight[:, sl] = 0   # nn.Linear weight: (out, in); a head is columns
            else:
                proj.weight[sl, :] = 0   # GPT-2's Conv1D weight: (in, out); a head is rows
        with ablate_heads(model, [(layer, head, kind)]):
            hooked = logits(model)
        assert torch.allclose(hooked, logits(edited), atol=1e-6), (layer, head, kind)


def test_gpt2_heads_are_conv1d_rows_not_columns(tiny_model):
    model, _ = tiny_model("gpt2")
    proj = describe(model).mixer(1).out_proj
    assert isinstance(proj, tf.pytorch_utils.Conv1D) and proj.weight.shape == (32, 32)
    head, D = 1, 8
    rows, cols = copy.deepcopy(model), copy.deepcopy(model)
    with torch.no_grad():
        describe(rows).mixer(1).out_proj.weight[head * D:(head + 1) * D, :] = 0
        describe(cols).mixer(1).out_proj.weight[:, head * D:(head + 1) * D] = 0
    with ablate_heads(model, [(1, head)]):
        hooked = logits(model)
    assert torch.allclose(hooked, logits(rows), atol=1e-6)
    assert not torch.allclose(hooked, logits(cols), atol=1e-3)  # the Linear convention would be wrong here


@pytest.mark.parametrize("family", MORE_FAMILIES)
def test_start_at_layer_and_truncate(tiny_model, family):
    model, _ = tiny_model(family, layers=3)
    full = logits(model)
    cached = capture_layer_inputs(model, [2], input_ids=IDS)[2]
    with start_at_layer(model, 2, cached):
        resumed = logits(model)
    assert torch.allclose(resumed, full, atol=1e-6)
    with start_at_layer(model, 2, torch.zeros_like(cached)):
        assert not torch.allclose(logits(model), full)  # layer 2 really reads the fed state
    sliced = copy.deepcopy(model)
    del adapter_for(sliced).layers()[2]
    with truncate(model, 2):
        truncated = logits(model)
    assert torch.equal(truncated, logits(sliced)) and not torch.allclose(truncated, full)


@pytest.fixture(scope="module")
def probe(word_tokenizer):
    examples = generate_kv_probe(n_pairs=4, n_examples=6, seed=3, fmt="compact",
                                 key_pool=[f"k{i}" for i in range(20)])
    return encode(examples, word_tokenizer)


@pytest.mark.parametrize("family", MORE_FAMILIES)
def test_scan_equals_naive_loop_for_every_head(tiny_model, probe, family):
    model, _ = tiny_model(family, spec=SCAN_SPEC.get(family))
    fast = scan_heads(model, probe, batch_size=4, max_rows=24, progress=False)
    slow = naive_scan_heads(model, probe)
    joined = fast.merge(slow, on=["layer", "kind", "head"], suffixes=("", "_naive"))
    assert len(joined) == len(fast) == len(slow) == describe(model).n_heads_total
    assert set(fast.kind) == {k for _, mixers0, mixers1 in [EXPECTED[family]] for k, _, _ in mixers0 + mixers1}
    assert (joined.accuracy == joined.accuracy_naive).all()
    assert torch.allclose(torch.tensor(joined.answer_logprob.values), torch.tensor(joined.answer_logprob_naive.values),
                          atol=1e-5)
    assert (joined["rank"] == joined["rank_naive"]).all()


@pytest.mark.parametrize("family", ["falcon-h1", "granitemoehybrid", "bamba", "nemotron-h"])
@pytest.mark.parametrize("rms_norm", [False, True])
def test_mamba2_mixing_terms_reproduce_the_hybrid_mixer(family, rms_norm):
    """The SSD matrix (G&A patterns, masking) of Falcon-H1 (muP multipliers, optional gated norm) and
    Granite's Mamba-2 layers: ``out_proj(gate(matrix @ x))`` equals the mixer's own output."""
    if family != "falcon-h1" and rms_norm:
        pytest.skip("only Falcon-H1's Mamba-2 gated norm is optional")
    extra = dict(mamba_rms_norm=True, ssm_in_multiplier=0.5, ssm_multipliers=[1.5, 0.7, 1.2, 0.9, 1.1]) \
        if family == "falcon-h1" and rms_norm else {}
    model = build_tiny_model(family, **extra)
    mixer = next(m for m in describe(model).mixers if m.kind == "mamba2").module
    seen = []
    handle = mixer.register_forward_hook(lambda mod, args, kwargs, out: seen.append(
        (args[0] if args else kwargs["hidden_states"], out)),
                                         with_kwargs=True)
    logits(model)
    handle.remove()
    hidden, out = seen[0]
    with torch.no_grad():
        x, matrix, gate = mamba2_terms(mixer, hidden)
        assert matrix.shape == (1, 8, IDS.shape[1], IDS.shape[1])
        assert torch.allclose(mamba2_apply(mixer, x, matrix, gate), out, atol=1e-5)


def test_falcon_h1_is_not_described_as_attention_only(tiny_model_dir):
    model, _ = load_model({"path": tiny_model_dir("falcon-h1")})
    desc = describe(model)
    assert [sorted(m.kind for m in desc.mixers_in(i)) for i in range(2)] == [["attention", "mamba2"]] * 2
    assert not AttentionAdapter.matches(model)
    assert "mamba (FalconH1Mixer)" in AttentionAdapter.refusal(model)
    with pytest.raises(UnknownArchitectureError, match=r"FalconH1ForCausalLM.*'attention'.*mamba \(FalconH1Mixer\)"):
        load_model({"path": tiny_model_dir("falcon-h1"), "family": "attention"}, with_tokenizer=False)


def test_granite_or_jamba_attention_layer_first_is_not_taken_for_attention():
    """The generic adapter checks every layer: an interleaved model whose layer 0 happens to be
    attention is not an attention decoder (it used to be accepted on layer 0 alone)."""
    model = build_tiny_model("granitemoehybrid", layer_types=["attention", "mamba"])
    assert not AttentionAdapter.matches(model)
    assert "layer 1" in AttentionAdapter.refusal(model) and "no self_attn.o_proj" in AttentionAdapter.refusal(model)
    assert [m.kind for m in describe(model).mixers] == ["attention", "mamba2"]


def test_unsupported_architectures_are_refused_by_name(tmp_path):
    rwkv = tf.RwkvForCausalLM(tf.RwkvConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                            attention_hidden_size=16, intermediate_size=32))
    rwkv.save_pretrained(tmp_path / "rwkv")
    with pytest.raises(UnknownArchitectureError, match=r"unsupported architecture RwkvForCausalLM.*supported "
                                                       r"families: attention \(Llama") as e:
        load_model({"path": str(tmp_path / "rwkv")}, with_tokenizer=False)
    for family in ("mamba1", "mamba2", "zamba2", "llamba", "jamba", "falcon-h1", "granitemoehybrid", "gpt2", "phi"):
        assert f"; {family} (" in str(e.value)
    # A made-up hybrid: a Llama whose layer 1 also runs a Mamba-2 mixer the adapters do not know.
    llama = build_tiny_model("llama")
    llama.model.layers[1].ssm = tf.Mamba2Model(tf.Mamba2Config(
        num_heads=4, head_dim=16, hidden_size=32, num_hidden_layers=1, n_groups=1, vocab_size=8)).layers[0].mixer
    with pytest.raises(UnknownArchitectureError, match=r"LlamaForCausalLM.*layer 1.*ssm \(Mamba2Mixer\).*" + r"supported families: attention"):
        attach_adapter(llama)
    # GPT-2 as the decoder of an encoder-decoder pair: a cross-attention mixer per layer.
    gpt2 = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, add_cross_attention=True))
    with pytest.raises(UnknownArchitectureError, match="GPT2LMHeadModel.*cross-attention"):
        attach_adapter(gpt2)
