"""The plan's CPU decode step, fitted on the real baselines' generation jobs
(benchmarks/results/baselines.csv): the constants are that fit, each measured job's plan lands near
what it took, and a measurement that cannot calibrate is refused."""
from pathlib import Path

import pytest

from gna.plan import Hardware
from gna.plan.cpu_generation import GENERATION_MEASURED, fit, job_parts, measured_jobs, read_config
from gna.plan.estimate import generation_parts, task_size
from gna.plan.job_estimates import baseline_task
from gna.plan.jobs import Study
from gna.plan.scan_methods import cpu_hardware

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.25
"""How far the fitted step may miss a measured job: one constant for four jobs whose models stop
early by different amounts (BBH's budget is 1,024 tokens, GSM8K's 256)."""


def cpu(cfg, hw=None):
    return cpu_hardware(hw or Hardware(), cfg["dtype"], "lm-eval")


def test_the_cpu_decode_constants_are_the_fit_of_the_committed_measurement():
    cfg = read_config(ROOT)
    jobs = measured_jobs(ROOT / GENERATION_MEASURED)
    assert {(j["model"], j["task"]) for j in jobs} == {(m, t) for m in ("smollm2-135m", "qwen2.5-coder-1.5b")
                                                       for t in ("gsm8k_local", "bbh_local")}
    assert Hardware().cpu_bandwidth_gbs == pytest.approx(fit(cfg, cpu(cfg), jobs), abs=0.05)
    assert cpu(cfg).decode_overhead_per_layer_s == 0.0


def test_each_measured_generation_job_is_planned_near_what_it_took():
    cfg = read_config(ROOT)
    study = Study(cfg, cpu(cfg))
    for job in measured_jobs(ROOT / GENERATION_MEASURED):
        # the rule's own estimate, less the load, which the measured seconds leave out
        planned = baseline_task(study, {"model": job["model"], "task": job["task"]}).hours * 3600
        info = study.info(job["model"])
        planned -= study.hw.job_overhead_s + info.weight_bytes / (study.hw.load_gbs * 1e9)
        assert abs(planned - job["cpu_s"]) <= TOLERANCE * job["cpu_s"], (job, planned)


def test_a_decode_step_on_a_cpu_reads_the_weights_and_a_gpu_keeps_its_own():
    cfg = read_config(ROOT)
    info = Study(cfg, Hardware()).info("qwen2.5-coder-1.5b")
    t = task_size("gsm8k_local", 20)
    on_cpu, on_gpu = cpu(cfg), Hardware()
    assert on_cpu.bandwidth_gbs == Hardware().cpu_bandwidth_gbs and on_gpu.bandwidth_gbs == 2500.0
    g = generation_parts(on_cpu, info, t, 4)
    assert g["steps"] == 5 * 256 and g["weight_bytes"] == info.weight_bytes
    # the truncated model reads its kept layers' weights only
    assert generation_parts(on_cpu, info, t, 4, layers=14)["weight_bytes"] == pytest.approx(info.weight_bytes / 2)


def test_a_measurement_that_cannot_calibrate_is_refused(tmp_path):
    header = "model,task,metric,filter,value,n,ci_low,ci_high,chance,cpu_s,items,cpu_s_per_item,cpu_s_complete\n"
    f = tmp_path / "b.csv"
    f.write_text(header + "smollm2-135m,gsm8k_local,exact_match,strict-match,0,50,0,.07,0,140,50,2.8,False\n")
    with pytest.raises(ValueError, match="lower bound"):
        measured_jobs(f)
    cfg = read_config(ROOT)
    one = [{"model": "smollm2-135m", "task": "gsm8k_local", "cpu_s": 140.0, "items": 50}]
    with pytest.raises(ValueError, match="at least two"):
        fit(cfg, cpu(cfg), one)
    # a job far faster than reading its weights each step allows: no positive fit
    fast = one + [{"model": "qwen2.5-coder-1.5b", "task": "gsm8k_local", "cpu_s": 120.0, "items": 50}]
    with pytest.raises(ValueError, match="bound by FLOPs|no positive fit"):
        fit(cfg, cpu(cfg), fast)
    parts = job_parts(cfg, cpu(cfg), one[0])
    assert parts["steps"] == 13 * 256 and parts["fixed_s"] > 0
