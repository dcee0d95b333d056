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
from gna.models.llamba.modeling import ssd_scan
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
    assert kw["chunk_size"] == mixer.chunk_size and kw["dt_softplus"] is False and not kw["return_final_states"]
    assert kw["dt"].dtype == torch.float32 and (kw["dt"] > 0).all()  # softplus(A_log), floored
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


def strict_causal_conv1d(x, weight, bias=None, activation=None):
    """reference_causal_conv1d behind causal-conv1d's own checks (csrc/causal_conv1d.cpp)."""
    if not (x.stride(2) == 1 or x.stride(1) == 1):
        raise RuntimeError("x.stride(2) == 1 || x.stride(1) == 1")
    if x.stride(1) == 1 and x.stride(2) > 1:  # channel last
        if x.shape[1] % 8:
            raise RuntimeError("causal_conv1d only supports channel dimension divisible by 8 for now")
        if x.stride(2) % 8 or x.stride(0) % 8:
            raise RuntimeError("causal_conv1d with channel last layout requires strides (x.stride(0) and "
                               "x.stride(2)) to be multiples of 8")
    if not 2 <= weight.shape[-1] <= 4:
        raise RuntimeError("causal_conv1d only supports width between 2 and 4")
    return reference_causal_conv1d(x, weight, bias, activation=activation)


def in_proj_view(b, T, conv_dim, width):
    """The conv input as the mixer hands it over: a (b, T, conv_dim) slice of in_proj's (b, T, width)
    output, transposed to (b, conv_dim, T) (channel-last, strides (T * width, 1, width))."""
    return torch.randn(b, T, width)[..., :conv_dim].transpose(1, 2)


@pytest.mark.parametrize("arch", ["llamba-3b", "llamba-8b"])
def test_published_llamba_shapes_pass_the_conv_kernels_checks_as_views(arch):
    import json
    from pathlib import Path
    cfg = LlambaConfig(**{k: v for k, v in json.loads((Path(__file__).resolve().parents[1] / "data/architectures"
                                                       / arch / "config.json").read_text()).items()
                          if k != "model_type"})
    ssm, d = cfg.ssm_cfg, cfg.d_model
    d_inner = ssm.get("expand", 1) * d
    conv_dim = d_inner + 2 * ssm["n_qk_heads"] * ssm["d_state"]
    x = in_proj_view(2, 5, conv_dim, conv_dim + d_inner + ssm["n_v_heads"])
    kept = kernels.conv_input(x, 4)
    assert kept is x  # no copy at the published shapes
    strict_causal_conv1d(kept, torch.randn(conv_dim, 4))


def test_misaligned_conv_input_is_copied_to_a_layout_the_kernel_takes(fake_kernels, monkeypatch):
    """The tiny config's conv input (32 + 2 x 2 x 8 = 64 channels of a 64 + 32 + 4 = 100 wide in_proj
    output): a channel-last view whose strides are not multiples of 8, which causal_conv1d_fn refuses."""
    x = in_proj_view(2, 7, 64, 100)
    with pytest.raises(RuntimeError, match="multiples of 8"):
        strict_causal_conv1d(x, torch.randn(64, 4))
    fixed = kernels.conv_input(x, 4)
    assert torch.equal(fixed, x) and fixed.stride(2) == 1
    assert kernels.conv_input(x, 5) is None  # a width the kernel lacks: the PyTorch conv runs
    # the whole model on the fused path, the conv kernel behind its real checks
    monkeypatch.setattr(sys.modules["causal_conv1d"], "causal_conv1d_fn", strict_causal_conv1d)
    kernels._import_kernels.cache_clear()
    model = tiny_llamba()
    ids = torch.randint(3, 100, (2, 19))
    ref = run(model, ids)
    monkeypatch.setattr(kernels, "on_cuda", lambda t: True)
    assert (run(model, ids) - ref).abs().max() < 1e-4


def test_fused_scan_survives_an_underflowing_softplus():
    """A_log = -200: softplus underflows to 0 in float32; x / softplus(A_log) was inf, the kernel's
    dt x = 0 x inf = NaN. Floored, the step adds x (dt x = x) and decays by exp(-dt) = 1, as the PyTorch scan."""
    torch.manual_seed(0)
    b, T, h, p, n = 1, 12, 2, 4, 3
    x, B, C = torch.randn(b, T, h, p), torch.randn(b, T, h, n), torch.randn(b, T, h, n)
    A_log = torch.randn(b, T, h)
    A_log[0, 3:6, 1] = -200.0
    y, _ = kernels.fused_ssd(reference_chunk_scan, x, A_log, B, C, chunk_size=4)
    ref, _ = ssd_scan(x, -F.softplus(A_log), B, C, 4)
    assert torch.isfinite(y).all() and (y - ref).abs().max() < 1e-4


@pytest.mark.gpu
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
    monkeypatch.setenv("GNA_FUSED_KERNELS", "0")  # this machine's Llamba has no fused kernels: allow its PyTorch path

    loading.load_model(ModelSpec(path=str(path), device="cuda:0"), with_tokenizer=False)
    assert recorder.kwargs[-1]["device_map"] == "cuda:0" and moved == []   # no host copy moved afterwards

    loading.load_model(ModelSpec(path=str(path), device="cpu"), with_tokenizer=False)
    assert "device_map" not in recorder.kwargs[-1] and moved == [("cpu",)]   # the CPU path as before
