"""The scan at its compute floor: the LM head gathered per row, the same rankings as before; an SSM
model on a GPU without its fused kernels refused at start."""
from pathlib import Path

import pandas as pd
import pytest
import torch

from gna.errors import DeviceError

ROOT = Path(__file__).resolve().parents[1]


def test_ssm_model_on_cuda_without_fused_kernels_is_refused_before_any_weight_is_read(monkeypatch):
    import transformers

    from gna.models import loading, ssm_kernels

    monkeypatch.delenv("GNA_FUSED_KERNELS", raising=False)
    monkeypatch.setattr(loading, "check_device", lambda device, **kw: "cuda")       # a faked GPU machine
    monkeypatch.setattr(ssm_kernels, "importable", lambda module: module != "mamba_ssm")  # mamba-ssm missing

    def no_load(*a, **k):
        raise AssertionError("weights were read before the refusal")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_load)
    with pytest.raises(DeviceError) as e:
        loading.load_model({"path": str(ROOT / "data/models/micro-mamba2"), "device": "cuda"})
    msg = str(e.value)
    assert "\n" not in msg
    assert "mamba-ssm" in msg and "causal-conv1d" not in msg and "GNA_FUSED_KERNELS=0" in msg
    assert "mamba2" in msg


def test_the_refusal_names_both_packages_and_spares_transformers_cpu_and_the_allowed_path(monkeypatch):
    from gna.models import ssm_kernels

    monkeypatch.delenv("GNA_FUSED_KERNELS", raising=False)
    monkeypatch.setattr(ssm_kernels, "importable", lambda module: False)
    with pytest.raises(DeviceError, match="mamba-ssm and causal-conv1d"):
        ssm_kernels.require_fused_kernels("llamba", "cuda:0", "model llamba-8b")
    ssm_kernels.require_fused_kernels("llama", "cuda", "model llama")       # no SSM: nothing to refuse
    ssm_kernels.require_fused_kernels("zamba2", "cpu", "model zamba2")      # the CPU has only the PyTorch path
    monkeypatch.setenv("GNA_FUSED_KERNELS", "0")                            # the PyTorch path, chosen
    ssm_kernels.require_fused_kernels("zamba2", "cuda", "model zamba2")


def _real_width_slice(shape: str, layers: int = 1):
    """A slice of a paper model: its config.json at full width, heads and vocabulary, ``layers``
    decoder layers, random weights in bf16 (the plan's dtype)."""
    import json

    from transformers import LlamaConfig, LlamaForCausalLM

    from gna.models.adapters import attach_adapter
    from gna.plan import estimate as E

    cfg = json.loads((ROOT / "data/architectures" / shape / "config.json").read_text())
    cfg["num_hidden_layers"] = layers
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.items() if k != "architectures"}))
    model = model.to(torch.bfloat16).eval()
    attach_adapter(model)
    return model, E.model_info(f"{shape}-slice", cfg, dtype="bfloat16")


def _probe_like(n: int, tokens: int, vocab: int):
    from gna.probes.encoded import EncodedProbe

    g = torch.Generator().manual_seed(0)
    low = min(1000, vocab // 2)
    prompts = [torch.randint(low, vocab, (tokens - 3 + i,), generator=g).tolist() for i in range(n)]
    return EncodedProbe(ids=[str(i) for i in range(n)], prompt_ids=prompts,
                        choice_ids=[[[low + c] for c in range(8)] for _ in range(n)],
                        answers=torch.randint(0, 8, (n,), generator=g), n_choices=8, pad_id=0,
                        single_token=True, one_row=True)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "atp"])
def test_the_plans_scan_peak_holds_against_the_measured_peak_of_a_real_width_slice(method):
    """Llama-3.2-1B's width and 128k vocabulary, one layer, bf16: the plan's peak for the scan rows
    (the fp32 head copy, the gathered logits, AtP's backward) within tests/test_plan.py's tolerance
    (0.75x to 2.5x of the profiler's peak; the estimate may be high, never much lower)."""
    from test_plan import HIGH, HW, LOW, measured_peak

    from gna.scan.attribution import atp_scan
    from gna.plan import estimate as E
    from gna.scan import scan_heads, select_mixers as _select

    model, info = _real_width_slice("llama-1b")
    enc = _probe_like(4, 40, info.vocab)
    T = max(len(p) for p in enc.prompt_ids)
    if method == "exact":
        got = measured_peak(lambda: scan_heads(model, enc, batch_size=4, max_rows=8, progress=False,
                                               heads=[(0, 0, "attention"), (0, 1, "attention")]))
    else:
        got = measured_peak(lambda: atp_scan(model, enc, _select(model), batch_size=4, progress=False))
    _, est = E.head_scan(HW, info, 4, 8, batch_size=4, max_rows=8, classify_top=0, tokens=T, method=method)
    assert LOW <= est / got <= HIGH, (est / 1e9, got / 1e9)


BEFORE = ROOT / "tests/data/exact_rankings_before_gather.csv"


def _same_ranking_as_before(name: str):
    """The exact scan with the LM head gathered per row ranks the heads exactly as the scan did when it
    projected every row at the union of its batch's positions (tests/data: that scan's rankings of the
    shipped micro models, micro study's probe: compact KV, 8 pairs, 200 prompts, seed 0, main f153210)."""
    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode
    from gna.scan import scan_heads

    before = pd.read_csv(BEFORE).query("model == @name").sort_values("rank")
    model, tok = load_model({"path": str(ROOT / "data/models" / name)})
    enc = encode(generate_kv_probe(8, 200, 0, separator=" ", fmt="compact"), tok)
    after = scan_heads(model, enc, model_name=name, progress=False)
    key = ["layer", "kind", "head"]
    assert after[key].values.tolist() == before[key].values.tolist()
    merged = after.merge(before, on=key, suffixes=("", "_before"))
    assert (merged["drop"] - merged["drop_before"]).abs().max() < 1e-9
    assert (merged["logprob_drop"] - merged["logprob_drop_before"]).abs().max() < 1e-5


def test_the_gathered_head_ranks_micro_llama_as_before():
    _same_ranking_as_before("micro-llama")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["micro-mamba2", "micro-zamba2"])
def test_the_gathered_head_ranks_the_ssm_micro_models_as_before(name):
    _same_ranking_as_before(name)


def test_gathered_logits_equal_the_full_head_at_the_scored_positions_in_bf16_and_fp32():
    """The gathered head computes, per row, exactly the logits the full head computes there, with
    float32 weights whatever the model's dtype (a bf16 model's head is not computed in bf16 first)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from gna.probes.scoring import batch_choice_logprobs, fp32_logits, gathered_choice_logprobs, iter_batches

    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                             num_attention_heads=4, num_key_value_heads=4)).to(dtype).eval()
        enc = _probe_like(6, 12, 300)
        b = next(iter_batches(enc, 6))
        calls = []
        model.lm_head.register_forward_hook(lambda m, a, out: calls.append(out.dtype))
        with torch.no_grad(), fp32_logits(model) as head:
            full = batch_choice_logprobs(model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits, b)
            with head.gather(b):
                logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
        assert logits.shape == (1, len(b.score_rows), 300) and logits.dtype == torch.float32
        assert calls == [torch.float32, torch.float32]   # one product per call, float32, no bf16 one
        torch.testing.assert_close(gathered_choice_logprobs(logits, b)[0], full, rtol=0, atol=1e-5)


def test_the_sequential_guard_samples_until_its_bound_is_below_the_level():
    from gna.scan.attribution_ranking import attribution_ranking, upper_bound
    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode

    model, tok = load_model({"path": str(ROOT / "data/models/micro-llama")})
    enc = encode(generate_kv_probe(8, 32, 0, separator=" ", fmt="compact"), tok)
    # the bar, candidate #2 (L4H2, drop 0.5 on these 32 prompts), is beyond noise: the guard may draw on
    ranking, guard = attribution_ranking(model, enc, "atp+exact", candidates=4, guard_sample=2, guard_k=2,
                                         guard_level=0.3, progress=False)
    rest = guard.n_heads - guard.candidates
    assert guard.level_met and guard.bound_share <= 0.3
    assert guard.bound_share == pytest.approx(upper_bound(guard.sample_beats_kth, guard.sampled, rest) / rest)
    # one draw fewer would not have met it: it stopped as soon as the bound allowed
    assert upper_bound(guard.sample_beats_kth, guard.sampled - 1, rest) / rest > 0.3
    assert ranking["exact"].sum() == guard.candidates + guard.sampled
    assert ranking["rank"].tolist() == list(range(1, len(ranking) + 1))
    assert "level 0.30 met" in guard.summary()
