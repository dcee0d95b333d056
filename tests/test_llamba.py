"""Llamba / discrete Mamba-2: loading (own and published layout), scan, mixing matrix, padding, generate."""
import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from gna.models.llamba import (DiscreteMamba2, LlambaConfig, LlambaForCausalLM, is_llamba_config, load_llamba,
                               ssd_scan)
from gna.models.tiny import strengthen_llamba_mixers

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

torch.set_num_threads(1)


def tiny_model(seed=0, **kw):
    torch.manual_seed(seed)
    model = LlambaForCausalLM(LlambaConfig.tiny(**kw)).eval()
    return strengthen_llamba_mixers(model)   # O(1) mixer signals: a wrong state would show


def naive_scan(x, log_a, B, C):
    """The recurrence h_t = exp(log_a_t) h_{t-1} + x_t B_t^T, y_t = h_t C_t, one step at a time."""
    b, T, h, p = x.shape
    state = x.new_zeros(b, h, p, B.shape[-1])
    ys = []
    for t in range(T):
        state = torch.exp(log_a[:, t])[..., None, None] * state + x[:, t, :, :, None] * B[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", state, C[:, t]))
    return torch.stack(ys, 1), state


def test_config_aliases_and_detection():
    cfg = LlambaConfig.tiny(vocab_size=100)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.padded_vocab_size) == (32, 2, 104)
    assert cfg.tie_word_embeddings is False and cfg.ssm_cfg["d_conv"] == 4 and cfg.ssm_cfg["conv_bias"]
    published = dict(vocab_size=128256, d_model=64, n_layer=2, ssm_cfg=dict(n_v_heads=4, n_qk_heads=4),
                     mlp_cfg=dict(intermediate_size=8))
    assert is_llamba_config(published) and is_llamba_config({"model_type": "llamba"})
    assert not is_llamba_config({"model_type": "mamba", "d_model": 64, "n_layer": 2, "vocab_size": 9,
                                 "ssm_cfg": {"layer": "Mamba2"}})


def test_save_pretrained_round_trip(tmp_path):
    model = tiny_model(vocab_size=100)
    ids = torch.randint(3, 100, (2, 21))
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, LlambaForCausalLM)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    assert model(ids).logits.shape == (2, 21, 104)  # padded vocabulary, as in the reference


def published_state_dict(cfg, tied, head_key="lm_head.weight"):
    """Random tensors under the published key names and shapes (no model involved)."""
    g = torch.Generator().manual_seed(1)
    d, V = cfg["d_model"], -(-cfg["vocab_size"] // cfg["pad_vocab_size_multiple"]) * cfg["pad_vocab_size_multiple"]
    s, inter = cfg["ssm_cfg"], cfg["mlp_cfg"]["intermediate_size"]
    conv_dim = d + 2 * s["n_qk_heads"] * s["d_state"]
    r = lambda *shape: torch.randn(*shape, generator=g) * 0.1  # noqa: E731
    sd = {"backbone.embedding.weight": r(V, d), "backbone.final_layernorm.weight": 1 + r(d)}
    for i in range(cfg["n_layer"]):
        p = f"backbone.layers.{i}."
        sd |= {p + "input_layernorm.weight": 1 + r(d), p + "post_attention_layernorm.weight": 1 + r(d),
               p + "mixer.in_proj.weight": r(2 * d + 2 * s["n_qk_heads"] * s["d_state"] + s["n_v_heads"], d),
               p + "mixer.z_bias": r(d), p + "mixer.conv1d.weight": r(conv_dim, 1, 4),
               p + "mixer.conv1d.bias": r(conv_dim), p + "mixer.D": r(s["n_v_heads"]),
               p + "mixer.out_proj.weight": r(d, d), p + "mlp.gate_proj.weight": r(inter, d),
               p + "mlp.up_proj.weight": r(inter, d), p + "mlp.down_proj.weight": r(d, inter)}
    if not tied:
        sd[head_key] = r(V, d)
    return sd


@pytest.mark.parametrize("tied,model_type,head_key", [
    (True, "llamba", None), (False, "llamba", "lm_head.weight"),
    (False, None, "lm_head.weight"), (False, "something-else", "backbone.lm_head.weight")])
def test_load_published_layout(tmp_path, tied, model_type, head_key):
    # Field names and nesting as in cartesia-ai/Llamba-3B config.json (d_conv, conv_bias omitted).
    cfg = {"vocab_size": 100, "tie_embeddings": tied, "pad_vocab_size_multiple": 8, "lm_head_bias": False,
           "d_model": 32, "n_layer": 2, "resid_dropout": 0.0, "norm_epsilon": 1e-5,
           "mlp_cfg": {"intermediate_size": 48, "bias": False, "act_fn": "silu"},
           "ssm_cfg": {"d_state": 8, "n_v_heads": 4, "n_qk_heads": 2, "expand": 1, "chunk_size": 16,
                       "activation": "identity", "bias": False}}
    if model_type:
        cfg = {"model_type": model_type, **cfg}
    sd = published_state_dict(cfg, tied, head_key)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(sd, str(tmp_path / "model.safetensors"))
    model = load_llamba(str(tmp_path)).eval()
    params = dict(model.named_parameters(remove_duplicate=False))
    for key, tensor in sd.items():
        assert torch.equal(params[key.replace("backbone.lm_head", "lm_head")], tensor), key
    head = params["lm_head.weight"]
    assert torch.equal(head, sd["backbone.embedding.weight"] if tied else sd[head_key])
    logits = model(torch.randint(0, 100, (1, 9))).logits
    assert logits.shape == (1, 9, 104) and torch.isfinite(logits).all()


def test_chunked_scan_matches_recurrence():
    torch.manual_seed(0)
    b, T, h, p, n = 2, 50, 3, 4, 5
    x, B, C = torch.randn(b, T, h, p), torch.randn(b, T, h, n), torch.randn(b, T, h, n)
    log_a = -F.softplus(torch.randn(b, T, h))
    inputs = [t.double().requires_grad_() for t in (x, log_a, B, C)]
    y, final = ssd_scan(*inputs, chunk_size=16)
    y_ref, final_ref = naive_scan(*inputs)
    assert torch.allclose(y, y_ref, atol=1e-10) and torch.allclose(final, final_ref, atol=1e-10)
    w = torch.randn_like(y)
    grads = torch.autograd.grad((y * w).sum(), inputs)
    grads_ref = torch.autograd.grad((y_ref * w).sum(), inputs)
    for g, g_ref in zip(grads, grads_ref):
        assert torch.allclose(g, g_ref, atol=1e-9)


@pytest.mark.parametrize("n_qk_heads", [4, 2])
def test_mixing_matrix_reproduces_mixer(n_qk_heads):
    model = tiny_model(ssm_cfg=dict(n_qk_heads=n_qk_heads))
    mixer: DiscreteMamba2 = model.backbone.layers[1].mixer
    u = torch.randn(2, 50, 32)  # T=50 spans four chunks of 16
    with torch.no_grad():
        M = mixer.mixing_matrix(u)
        x, _, _, _, z = mixer.ssm_inputs(u)
        y = torch.einsum("bhls,bshp->blhp", M, x).flatten(-2)
        out = mixer.out_proj(y * F.silu(z + mixer.z_bias))
        ref = mixer(u)
    assert M.shape == (2, mixer.n_heads, 50, 50) and torch.equal(M.triu(1), torch.zeros_like(M))
    assert ref.abs().max() > 0.1 and (out - ref).abs().max() < 1e-4
    # Hooks see the heads-major out_proj input: zeroing head 0 there equals zeroing its rows of M.
    assert mixer.out_proj.in_features == mixer.n_heads * mixer.head_dim


def test_mixing_mask():
    mixer = tiny_model().backbone.layers[0].mixer
    u = torch.randn(2, 40, 32)
    with torch.no_grad():
        ref = mixer(u)
        ones = torch.ones(2, mixer.n_heads, 40, 40)
        assert (mixer(u, mixing_mask=ones) - ref).abs().max() < 1e-5
        diag_only = mixer(u, mixing_mask=torch.eye(40).expand_as(ones))
        assert ref.abs().max() > 0.1 and (diag_only - ref).abs().max() > 1e-2
        assert torch.allclose(mixer(u, mixing_matrix=mixer.mixing_matrix(u)), ref, atol=1e-5)


def test_padding_invariance():
    model = tiny_model(vocab_size=100)
    a, b = torch.randint(3, 100, (1, 37)), torch.randint(3, 100, (1, 23))
    pad = torch.zeros(1, 14, dtype=torch.long)
    with torch.no_grad():
        alone = model(b).logits
        right = model(torch.cat([torch.cat([b, pad], 1), a]),
                      attention_mask=torch.tensor([[1] * 23 + [0] * 14, [1] * 37])).logits
        left = model(torch.cat([pad, b], 1), attention_mask=torch.tensor([[0] * 14 + [1] * 23])).logits
        a_alone = model(a).logits
    assert (right[0, :23] - alone[0]).abs().max() < 1e-5
    assert (right[1] - a_alone[0]).abs().max() < 1e-5
    assert (left[0, 14:] - alone[0]).abs().max() < 1e-4


def test_layers_return_tensors_and_training_step():
    model = tiny_model(vocab_size=100).train()
    h = torch.randn(1, 5, 32)
    assert isinstance(model.backbone.layers[0](h, attention_mask=None), torch.Tensor)
    ids = torch.randint(3, 100, (2, 20))
    out = model(ids, labels=ids)
    out.loss.backward()
    assert torch.isfinite(out.loss) and model.backbone.layers[0].mixer.in_proj.weight.grad.abs().sum() > 0


def test_greedy_generate():
    model = tiny_model(vocab_size=100)
    ids = torch.randint(3, 100, (1, 6))
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False)
    assert out.shape == (1, 11) and torch.equal(out[:, :6], ids)
    with torch.no_grad():  # the first new token is the argmax of the full forward
        assert out[0, 6] == model(ids).logits[0, -1].argmax()
