"""The GPU-only paths, checked on the CPU where possible: the fused mamba-ssm / causal-conv1d dispatch of the
discrete Mamba-2 mixer (with fake kernel modules that implement the kernels' documented semantics), and
the loader putting weights straight on the GPU. The real-kernel comparison runs only where CUDA and
mamba-ssm are present."""
import sys
import types

import pytest
import torch
import torch.nn.functional as F

from gna.models import loading
from gna.models.llamba import LlambaCache, LlambaConfig, LlambaForCausalLM, kernels
from gna.models.spec import ModelSpec
from gna.models.tiny import strengthen_llamba_mixers

torch.set_num_threads(1)


def tiny_llamba(activation="identity", n_qk_heads=2, seed=0):
    """4 value heads reading 2 B/C groups (so the kernel's grouping convention matters)."""
    torch.manual_seed(seed)
    model = LlambaForCausalLM(LlambaConfig.tiny(vocab_size=100, ssm_cfg=dict(
        n_qk_heads=n_qk_heads, activation=activation))).eval()
    return strengthen_llamba_mixers(model)   # O(1) mixer signals: a wrong state would show


def reference_chunk_scan(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                         seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                         return_final_states=False, return_varlen_states=False):
    """mamba_chunk_scan_combined's documented semantics, one step at a time (the signature is mamba-ssm's)."""
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    assert dt.shape == (b, l, h) and A.shape == (h,) and B.shape == C.shape == (b, l, g, n) and h % g == 0
    dt = dt.float() + (0 if dt_bias is None else dt_bias.float())
    if dt_softplus:
        dt = F.softplus(dt)
    dt = dt.clamp(*dt_limit)
    Bh, Ch = (t.float().repeat_interleave(h // g, 2) for t in (B, C))  # head i reads group i // (h / g)
    state = x.new_zeros(b, h, p, n, dtype=torch.float32) if initial_states is None else initial_states.float()
    ys = []
    for t in range(l):
        xt = x[:, t].float()
        state = (torch.exp(dt[:, t] * A)[..., None, None] * state
                 + (dt[:, t, :, None] * xt)[..., None] * Bh[:, t, :, None, :])
        y = torch.einsum("bhpn,bhn->bhp", state, Ch[:, t])
        if D is not None:
            y = y + (D[:, None] if D.dim() == 1 else D) * xt
        ys.append(y)
    y = torch.stack(ys, 1)
    if z is not None:
        y = y * F.silu(z.float())
    y = y.to(x.dtype)
    return (y, state) if return_final_states else y


def reference_causal_conv1d(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                            final_states_out=None, activation=None):
    """causal_conv1d_fn's semantics: x (b, d, l), weight (d, w) -> (b, d, l)."""
    assert x.dim() == 3 and weight.dim() == 2 and weight.shape[0] == x.shape[1] and activation in (None, "silu",
                                                                                                  "swish")
    w = weight.shape[1]
    out = F.conv1d(F.pad(x, (w - 1, 0)), weight[:, None], bias, groups=x.shape[1])
    return F.silu(out) if activation else out


@pytest.fixture
def fake_kernels(monkeypatch):
    """Install fake mamba_ssm / causal_conv1d modules that record their calls; returns the call list."""
    calls = []

    def scan(*args, **kwargs):
        calls.append(("scan", args, kwargs))
        return reference_chunk_scan(*args, **kwargs)

    def conv(*args, **kwargs):
        calls.append(("conv", args, kwargs))
        return reference_causal_conv1d(*args, **kwargs)

    for name in ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    ssd = types.ModuleType("mamba_ssm.ops.triton.ssd_combined")
    ssd.mamba_chunk_scan_combined = scan
    monkeypatch.setitem(sys.modules, "mamba_ssm.ops.triton.ssd_combined", ssd)
    cc = types.ModuleType("causal_conv1d")
    cc.causal_conv1d_fn = conv
    monkeypatch.setitem(sys.modules, "causal_conv1d", cc)
    kernels._import_kernels.cache_clear()
    yield calls
    kernels._import_kernels.cache_clear()


def run(model, ids, am=None):
    with torch.no_grad():
        return model(ids, attention_mask=am).logits


@pytest.mark.parametrize("activation", ["identity", "silu"])
def test_fused_kernels_only_on_cuda_with_the_right_arguments(fake_kernels, monkeypatch, activation):
    model = tiny_llamba(activation)
    ids = torch.randint(3, 100, (2, 37))   # 37: not a multiple of the chunk (16)
    am = torch.ones_like(ids)
    am[1, :5] = 0
    ref = run(model, ids, am)              # CPU tensors: the PyTorch scan, kernels importable or not
    assert fake_kernels == []

    monkeypatch.setattr(kernels, "on_cuda", lambda t: True)  # as if on a GPU
    fused = run(model, ids, am)
    assert (fused - ref)[am.bool()].abs().max() < 1e-4
    scans = [c for c in fake_kernels if c[0] == "scan"]
    convs = [c for c in fake_kernels if c[0] == "conv"]
    assert len(scans) == len(convs) == model.config.n_layer
    mixer = model.backbone.layers[0].mixer
    b, T, h, p, g, n = 2, 37, mixer.n_heads, mixer.head_dim, mixer.n_qk_heads, mixer.d_state
    _, args, kw = scans[0]
    assert args == () and kw["x"].shape == (b, T, h, p) and kw["dt"].shape == (b, T, h)
    assert kw["A"].shape == (h,) and torch.equal(kw["A"], -torch.ones(h))
    assert kw["B"].shape == kw["C"].shape == (b, T, g, n)   # the groups, not repeated per head
    assert kw["chunk_size"] == mixer.chunk_size and kw["dt_softplus"] is True and not kw["return_final_states"]
    _, args, kw = convs[0]
    assert args[0].shape == (b, mixer.conv1d.in_channels, T) and args[1].shape == (mixer.conv1d.in_channels, 4)
    assert kw["activation"] == (None if activation == "identity" else "silu")

    # a mixing mask needs the materialised matrix: that mixer runs no kernel, whatever the device
    fake_kernels.clear()
    mixer.mixing_mask = torch.ones(2, h, T, T)
    try:
        masked = run(model, ids)
    finally:
        mixer.mixing_mask = None
    assert len([c for c in fake_kernels if c[0] == "scan"]) == model.config.n_layer - 1  # not layer 0's
    assert (masked - run(model, ids)).abs().max() < 1e-4  # an all-ones mask changes nothing

    # switched off by the environment
    fake_kernels.clear()
    monkeypatch.setenv("GNA_FUSED_KERNELS", "0")
    assert torch.equal(run(model, ids, am), ref) and fake_kernels == []


def test_no_kernels_when_the_import_fails(monkeypatch):
    for name in ("mamba_ssm", "causal_conv1d"):
        monkeypatch.setitem(sys.modules, name, None)  # "import mamba_ssm" now raises ImportError
    kernels._import_kernels.cache_clear()
    monkeypatch.setattr(kernels, "on_cuda", lambda t: True)
    try:
        assert kernels.kernels_for(torch.zeros(1)) is None
        model = tiny_llamba()
        ids = torch.randint(3, 100, (1, 20))
        monkeypatch.setattr(kernels, "on_cuda", lambda t: False)
        ref = run(model, ids)
        monkeypatch.setattr(kernels, "on_cuda", lambda t: True)
        assert torch.equal(run(model, ids), ref)
    finally:
        kernels._import_kernels.cache_clear()


def test_fused_prefill_fills_the_generation_cache(fake_kernels, monkeypatch):
    """The final state the kernel returns is the cache's (b, h, p, n) state: generation goes on from it."""
    model = tiny_llamba()
    ids = torch.randint(3, 100, (2, 21))
    kw = dict(max_new_tokens=15, min_new_tokens=15, do_sample=False, pad_token_id=0)
    ref = model.generate(ids, use_cache=False, **kw)
    monkeypatch.setattr(kernels, "on_cuda", lambda t: True)
    cache = LlambaCache()
    with torch.no_grad():
        model(ids, cache_params=cache)
    assert cache.ssm[0].shape == (2, 4, 8, 8) and cache.ssm[0].dtype == torch.float32
    assert any(c[2].get("return_final_states") for c in fake_kernels if c[0] == "scan")
    assert torch.equal(model.generate(ids, use_cache=True, **kw), ref)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-3), (torch.bfloat16, 5e-2)])
def test_real_fused_kernels_match_the_pytorch_scan(monkeypatch, dtype, tol):
    pytest.importorskip("mamba_ssm.ops.triton.ssd_combined")
    kernels._import_kernels.cache_clear()
    model = tiny_llamba(n_qk_heads=2).to("cuda", dtype)
    ids = torch.randint(3, 100, (2, 300), device="cuda")   # several 16-token chunks
    fused = run(model, ids).float()
    monkeypatch.setenv("GNA_FUSED_KERNELS", "0")
    ref = run(model, ids).float()
    scale = ref.abs().max()
    assert (fused - ref).abs().max() < tol * scale


class _Recorder:
    """Stands in for from_pretrained: records kwargs, loads on the CPU whatever device_map says."""

    def __init__(self, real):
        self.real, self.kwargs = real, []

    def __call__(self, *args, **kwargs):
        self.kwargs.append(dict(kwargs))
        kwargs.pop("device_map", None)
        return self.real(*args, **kwargs)


@pytest.mark.parametrize("family", ["llama", "llamba"])
def test_loader_sends_cuda_models_straight_to_the_device(tiny_model_dir, monkeypatch, tmp_path, family):
    from transformers import AutoModelForCausalLM

    if family == "llamba":
        path = tmp_path / "llamba"
        tiny_llamba().save_pretrained(path)
        target = LlambaForCausalLM
    else:
        path = tiny_model_dir("llama")
        target = AutoModelForCausalLM
    recorder = _Recorder(target.from_pretrained)
    monkeypatch.setattr(target, "from_pretrained", recorder)
    moved = []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: (moved.append(a), self)[1])
    monkeypatch.setattr(loading, "check_device", lambda device: device)  # as if this machine had the GPU

    loading.load_model(ModelSpec(path=str(path), device="cuda:0"), with_tokenizer=False)
    assert recorder.kwargs[-1]["device_map"] == "cuda:0" and moved == []   # no host copy moved afterwards

    loading.load_model(ModelSpec(path=str(path), device="cpu"), with_tokenizer=False)
    assert "device_map" not in recorder.kwargs[-1] and moved == [("cpu",)]   # the CPU path as before
