"""The plan's CPU rows for the head scan: the FLOPs it counts are the FLOPs the scan computes, and its
CPU rate is the one benchmarks/scan_cpu_real.py measured."""
import json
from pathlib import Path

import pytest
import torch
import yaml

from gna.config.schema import with_defaults
from gna.plan.cpu_rates import CPU_EFFICIENCY
from gna.plan import estimate as E
from gna.plan.jobs import Study
from gna.plan.scan_methods import cpu_gflops, cpu_hardware, scan_method_lines, scan_methods

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks/results/scan_cpu_real.json"


def test_the_plans_scan_flops_are_what_the_scan_computes():
    """A real-width slice (SmolLM2-135M's layer shapes and vocabulary, 2 layers, random weights): the
    plan's head_scan term at 1 FLOP/s is torch's FlopCounterMode count of the exact scan, within 5%
    (the plan counts attention causally, torch as a full T x T product: 1% of these FLOPs)."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import LlamaConfig, LlamaForCausalLM

    from gna.models.adapters import attach_adapter
    from gna.probes.encoded import EncodedProbe
    from gna.scan import scan_heads

    cfg = LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=2, num_attention_heads=9,
                      num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    attach_adapter(model, None)
    n, T = 8, 60
    g = torch.Generator().manual_seed(0)
    # every choice " " + one number token: one row per prompt, 2 scored positions (the plan's SCORED_POSITIONS)
    prompts = [torch.randint(100, 40000, (T,), generator=g).tolist() for _ in range(n)]
    enc = EncodedProbe(ids=[str(i) for i in range(n)], prompt_ids=prompts,
                       choice_ids=[[[216, 300 + c] for c in range(8)] for _ in range(n)],
                       answers=torch.zeros(n, dtype=torch.long), n_choices=8, pad_id=0, single_token=False, one_row=True)
    counter = FlopCounterMode(display=False)
    with counter:
        scan_heads(model, enc, batch_size=n, max_rows=4 * n, progress=False)  # the baseline, then every head
    info = E.model_info("slice", cfg.to_dict(), dtype="float32")
    hw = E.Hardware(fwd_tflops=1e-12, probe_padding_waste=1.0)  # seconds = FLOPs
    planned, _ = E.head_scan(hw, info, n, 8, batch_size=n, max_rows=4 * n, classify_top=0, tokens=T + 1)
    assert planned == pytest.approx(counter.get_total_flops(), rel=0.05)


def test_the_plans_cpu_rate_is_the_measured_one():
    summary = json.loads(MEASURED.read_text())["summary"]
    rates = summary["exact_gflops_cpu"]
    assert min(rates) * 0.9 <= E.Hardware().cpu_gflops <= max(rates) * 1.1
    assert summary["spec"]["threads"] == 1   # the rate is one core's


def test_the_plans_cpu_rows():
    cfg = with_defaults(yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text()))
    hw = E.Hardware()
    rows = scan_methods(cfg, hw, models=["llama-3b"])
    r = rows[0]
    info = Study(cfg, hw).info("llama-3b")
    # the CPU job: the same FLOPs as the GPU's at the CPU's rate, plus a CPU job's start-up and load
    gpu_scan_s = r["exact_scan_s"]
    rate = cpu_gflops(hw, cfg["dtype"]) * CPU_EFFICIENCY["head ablations"]  # bf16's, as the real study's scans ran
    assert cfg["dtype"] == "bfloat16" and rate == hw.cpu_gflops_bf16 * CPU_EFFICIENCY["head ablations"]
    assert r["exact_cpu_h"] * 3600 == pytest.approx(gpu_scan_s * hw.fwd_tflops * 1e3 / rate
                                                    + E.load_seconds(cpu_hardware(hw), info), rel=1e-6)
    assert E.load_seconds(cpu_hardware(hw), info) < E.load_seconds(hw, info)
    assert r["exact_cpu_h"] > r["atp+exact_cpu_h"] > 0
    assert cpu_hardware(hw).fwd_tflops == hw.cpu_gflops / 1e3
    lines = scan_method_lines(rows, hw)
    assert "## Head scan on a CPU" in lines
    assert f"| llama-3b | 672 | {r['exact_cpu_h']:,.1f} | {r['atp+exact_cpu_h']:,.1f} |" in "\n".join(lines)
