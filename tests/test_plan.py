"""The resource plan (gna.plan): estimates validated against measured peaks on tiny models, and
every job of the paper preset fitting what profiles/slurm asks for (so the two cannot drift)."""
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from gna.config.schema import with_defaults
from gna.plan import Hardware, check_profile, dag_jobs, plan, read_profile, summary
from gna.plan import estimate as E

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "workflow/configs/paper.yaml"
# The estimate may be high (its activation factor is conservative, and on tiny models constant
# terms weigh more) but must never be much lower than what is measured.
LOW, HIGH = 0.75, 2.5


def measured_peak(fn) -> float:
    """Peak bytes (parameters included) of ``fn`` on the CPU, from torch.profiler's memory timeline."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as p:
        fn()
    _, sizes = MemoryProfileTimeline(p._memory_profile())._coalesce_timeline(torch.device("cpu"))
    return float(np.array(sizes).sum(1).max())


HW = Hardware(gpu_overhead_gb=0)  # no CUDA context on the CPU


@pytest.fixture(scope="module")
def tiny_teacher():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=2048, hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=2)
    return LlamaForCausalLM(cfg).eval(), E.model_info("tiny-llama", cfg.to_dict(), dtype="float32")


def test_forward_eval_batch_estimate_matches_the_measured_peak(tiny_teacher):
    model, info = tiny_teacher
    x = torch.randint(0, 2048, (16, 128))

    def forward():  # what lm-eval does with a batch: logits, then their log-softmax
        with torch.no_grad():
            model(input_ids=x).logits.log_softmax(-1)

    ratio = E.forward_peak_bytes(HW, info, 16, 128) / measured_peak(forward)
    assert LOW <= ratio <= HIGH, ratio  # measured 39.5 MB, estimated 56.2 MB (1.42x)


def test_head_scan_layer_batches_estimate_matches_the_measured_peak():
    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode
    from gna.scan import scan_heads

    path = ROOT / "data/models/micro-llama"
    model, tok = load_model({"path": str(path)})
    enc = encode(generate_kv_probe(8, 64, 0, fmt="compact"), tok)
    T = max(len(p) + max(len(c) for c in cs) for p, cs in zip(enc.prompt_ids, enc.choice_ids))
    info = E.model_info("micro-llama", json.loads((path / "config.json").read_text()), dtype="float32")
    got = measured_peak(lambda: scan_heads(model, enc, batch_size=8, max_rows=64, progress=False))
    _, est = E.head_scan(HW, info, 64, 8, batch_size=8, max_rows=64, classify_top=0, tokens=T)
    assert LOW <= est / got <= HIGH, est / got  # measured 4.8 MB, estimated 9.4 MB (1.96x)


def test_llamba_head_scan_keeps_only_the_logits_it_reads(word_tokenizer):
    """Llamba takes a 1-D logits_to_keep now, so its scan projects the scored positions only (it
    made full float32 (rows, T, vocab) logits: measured 29.7 MB against the estimate's 5.7)."""
    from gna.models.llamba import LlambaConfig, LlambaForCausalLM
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import accepts_logits_to_keep, encode, score
    from gna.scan import scan_heads

    torch.manual_seed(0)
    cfg = LlambaConfig.tiny(vocab_size=4096)
    model = LlambaForCausalLM(cfg).eval()
    assert accepts_logits_to_keep(model)
    enc = encode(generate_kv_probe(8, 32, 0, fmt="compact", key_pool=[f"k{i}" for i in range(20)]), word_tokenizer)
    full = score(model, enc, batch_size=8, forward=lambda ids, am: model(input_ids=ids, attention_mask=am).logits)
    assert torch.allclose(score(model, enc, batch_size=8).logprobs, full.logprobs, atol=1e-5)
    T = max(len(p) + max(len(c) for c in cs) for p, cs in zip(enc.prompt_ids, enc.choice_ids))
    info = E.model_info("tiny-llamba", cfg.to_dict(), family="llamba", dtype="float32")
    got = measured_peak(lambda: scan_heads(model, enc, batch_size=8, max_rows=64, progress=False))
    _, est = E.head_scan(HW, info, 32, 8, batch_size=8, max_rows=64, classify_top=0, tokens=T)
    assert LOW <= est / got <= HIGH, est / got  # measured 4.5 MB, estimated 5.7 MB (1.27x)


def test_heldout_perplexity_in_chunks_equals_full_logits_and_its_estimate_holds(tiny_teacher):
    """The perplexity's LM head runs over chunks of positions (it made the batch's whole logits, an
    fp32 copy and a log-softmax: ~67 GB at 32 x 2047 x 128k); same number, the estimate's memory."""
    import math

    from gna.hybrid.study.data import heldout_perplexity

    model, info = tiny_teacher
    ids = torch.randint(0, 2048, (8, 128), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        lp = model(input_ids=ids).logits[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None])
    ref = math.exp(-lp.mean().item())
    for chunk in (7, 64, 5000):
        assert heldout_perplexity(model, [{"input_ids": ids}], 1, positions_per_chunk=chunk) == pytest.approx(ref, rel=1e-5)
    got = measured_peak(lambda: heldout_perplexity(model, [{"input_ids": ids}], 1, positions_per_chunk=64))
    est = E.heldout_perplexity(HW, info, 8, 128, positions_per_chunk=64)
    assert LOW <= est / got <= HIGH, est / got  # measured 14.3 MB, estimated 16.0 MB (1.12x); full logits 30.9 MB


def test_distillation_step_estimate_matches_the_measured_peak(tiny_teacher):
    from gna.hybrid.student import build_student
    from gna.hybrid.stage_losses import _stage3

    teacher, info = tiny_teacher
    student = build_student(teacher, [], state_size=8, chunk_size=16).train()
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, 2048, (8, 128))

    def step():  # one optimizer step over 4 micro-batches of 2 rows, logit loss in 64-token chunks
        _stage3(teacher, student, ids, None, micro_batch_size=2, vocab_chunk=64)
        opt.step()
        opt.zero_grad(set_to_none=True)

    got = measured_peak(step)
    s_info = E.student_info(info, 0, 8)
    assert s_info.params == pytest.approx(sum(p.numel() for p in student.parameters()), rel=0.01)
    _, est = E.training_step(HW, s_info, info, 2, 128, 3, vocab_chunk=64, chunk_size=16)
    assert LOW <= est / got <= HIGH, est / got  # measured 44.3 MB, estimated 39.9 MB (0.90x)


# -- the paper preset against the SLURM profile --------------------------------------------------

@lru_cache(maxsize=1)
def paper_plan():
    cfg = with_defaults(yaml.safe_load(PAPER.read_text()))   # as the workflow validates it
    jobs = dag_jobs(cfg, workdir=ROOT)
    profile = read_profile()
    hw = Hardware.from_dict({"gpu_mem_gb": profile["gpu"]["gpu_mem_gb"], **(profile["gpu"].get("plan") or {})})
    return jobs, plan(cfg, jobs, hw), profile


def test_the_plan_covers_every_job_of_the_paper_dag():
    jobs, rows, _ = paper_plan()
    assert len(rows) == len(jobs) > 400
    by_rule = {d["rule"]: d for d in summary(rows)}
    assert by_rule["head_scan"]["jobs"] >= 7 and by_rule["distill_stage"]["jobs"] == 20
    total = sum(d["gpu_hours"] for d in by_rule.values())
    assert 3000 <= total <= 6500, total  # the paper DAG's rough size, mostly distillation
    zamba = next(r for r in rows if r.rule == "head_scan" and "zamba2-7b" in r.wildcards)
    assert zamba.hours * 60 > 240  # the old 240-minute limit would have killed it


def test_every_paper_job_fits_what_the_slurm_profile_asks_for():
    _, rows, profile = paper_plan()
    assert profile["gpu"]["gpu_mem_gb"] == 80 and profile["profile"]["retries"] >= 1
    bad = check_profile(rows, profile)
    assert not bad, "\n".join(bad)


def test_check_profile_names_a_job_that_does_not_fit():
    _, rows, profile = paper_plan()
    small = {"profile": {**profile["profile"], "set-resources": {
        **profile["profile"]["set-resources"], "head_scan": {"runtime": 240, "mem_mb": 16000}}},
        "gpu": {**profile["gpu"], "gpu_mem_gb": 24}}
    bad = "\n".join(check_profile(rows, small))
    assert "head_scan[model=zamba2-7b,scan_dir=scan]" in bad and "> runtime 240 min" in bad
    assert "mem_mb 16000" in bad and "> 24 GB" in bad


def test_a_stage_on_more_gpus_takes_less_wall_time_at_the_same_memory_per_gpu():
    from gna.plan.jobs import Study
    from gna.plan.ranks import training_estimate as _training

    cfg = with_defaults(yaml.safe_load(PAPER.read_text()))
    s, d = Study(cfg, Hardware()), cfg["experiments"]["hybrid_distillation"]
    one, node, nodes = (_training(s, "llama-1b", d, 3, 20, 64, w) for w in ((1, 1), (8, 1), (8, 2)))
    assert (one.gpus, node.gpus, nodes.gpus) == (1, 8, 16)
    # the same micro-batches per rank: the same activations, plus the flat all-reduce bucket (25M fp32)
    assert node.gpu_gb - one.gpu_gb == pytest.approx(25 * 2**20 * 4 / 1e9)
    assert node.host_gb == pytest.approx(8 * one.host_gb)  # every rank of a node loads its own copy
    # one step's compute divided over the ranks, plus one gradient all-reduce per optimizer step
    assert one.hours / 8 < node.hours < 1.1 * one.hours / 8
    assert nodes.hours < node.hours and nodes.hours * 16 > node.hours * 8  # across nodes the all-reduce is slower


def test_the_paper_stages_run_on_8_gpus_each_within_one_attempt():
    _, rows, profile = paper_plan()
    from gna.plan import limits

    stages = [r for r in rows if r.rule in ("distill_matrices", "distill_stage")]
    assert {r.gpus for r in stages} == {8}
    longest = max(stages, key=lambda r: r.hours)
    assert "stage=3" in longest.wildcards and 30 < longest.hours < 48
    assert longest.hours * 60 <= limits(profile, "distill_stage")["runtime_min"]
    by_rule = {d["rule"]: d for d in summary(rows)}
    assert by_rule["distill_stage"]["gpu_hours"] == pytest.approx(sum(r.hours * 8 for r in stages
                                                                         if r.rule == "distill_stage"))


def test_the_scan_method_ratios_quoted_by_the_preset_and_the_manual_are_the_plans():
    """paper.yaml's comment on scan.method and docs/fast-scan.md's table quote gna.plan.scan_methods.scan_methods."""
    import re

    from gna.plan.scan_methods import scan_methods

    cfg = with_defaults(yaml.safe_load(PAPER.read_text()))
    rows = {r["model"]: r for r in scan_methods(cfg, models=["llama-3b", "llama-8b"])}
    comment = next(line for line in PAPER.read_text().splitlines() if line.strip().startswith("method:"))
    m = re.search(r"is ([\d.]+)x \(Llama-3\.2-3B\) to ([\d.]+)x \(Llama-3\.1-8B\) cheaper per job.*"
                  r"the scan alone (\d+)-(\d+)x", comment)
    assert m, comment
    assert (m[1], m[2]) == (f"{rows['llama-3b']['job_ratio']:.1f}", f"{rows['llama-8b']['job_ratio']:.1f}")
    assert (int(m[3]), int(m[4])) == (round(rows["llama-3b"]["scan_ratio"]), round(rows["llama-8b"]["scan_ratio"]))
    doc = (ROOT / "docs/fast-scan.md").read_text()
    for name, label in (("llama-3b", "Llama-3.2-3B"), ("llama-8b", "Llama-3.1-8B")):
        r = rows[name]
        want = (f"| {label} | {r['heads']:,} | {r['exact_scan_s']:,.0f} | {r['atp+exact_scan_s']:,.0f} | "
                f"{r['scan_ratio']:.1f}x | {r['job_ratio']:.1f}x | {r['exact_gpu_gb']:.1f} / {r['atp+exact_gpu_gb']:.1f} |")
        assert want in doc, want


def test_a_config_json_with_an_infinite_float_is_sized_by_the_plan():
    """transformers writes Mamba-2's time_step_limit (0, inf) as {"__float__": "Infinity"}; the plan
    builds its meta model from the dict, so the tag must be read back as the float."""
    from gna.config.architectures import config_of

    cfg = config_of(str(ROOT / "data/models/micro-mamba2"))
    assert cfg["time_step_limit"][1] == float("inf")
    info = E.model_info("micro-mamba2", cfg, dtype="float32")
    assert sum(h for (_, _, h) in info.heads_by_layer) == 32
