"""The plan's CPU rates, calibrated on the real-model study's measured job times
(benchmarks/results/real_study_job_times.csv): per experiment the calibrated plan lands within 25% of
what the run took, the rates are the fit of that file, and every row says what it rests on."""
import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from gna.config.schema import with_defaults
from gna.plan import Hardware, dag_jobs
from gna.plan.cpu_calibration import COLUMNS, compare, experiments, comparison_lines, fit, parts, read_measured
from gna.plan.cpu_hours import cpu_hour_lines, cpu_hours
from gna.plan.cpu_rates import CALIBRATED_ON, CPU_EFFICIENCY, CPU_LIGHT_WORK_S, MEASURED, MEASURED_CONFIG, \
    calibration_note, kind_of
from gna.plan.job_estimates import evaluation
from gna.plan.jobs import Study
from gna.plan.scan_methods import cpu_hardware

ROOT = Path(__file__).resolve().parents[1]
QWEN, SMOL = "qwen2.5-coder-1.5b", "smollm2-135m"


@lru_cache(maxsize=1)
def real():
    cfg = with_defaults(yaml.safe_load((ROOT / MEASURED_CONFIG).read_text()))
    return cfg, dag_jobs(cfg, workdir=ROOT)


# What the measured run's gradual pruning found (its figures/real/layer_pruning.csv, since regenerated
# by a later run of the preset, which no longer prunes SmolLM2): Fig. 3 and Table 1 ran on these depths.
MEASURED_MINIMAL_DEPTHS = {SMOL: 2, QWEN: 24}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Path:
    """A results folder holding what the measured run's gradual pruning found: each model's minimal
    depth (Fig. 3 and Table 1 run on the minimal model)."""
    out = tmp_path_factory.mktemp("results")
    (out / "pruning").mkdir()
    for model, depth in MEASURED_MINIMAL_DEPTHS.items():
        (out / "pruning" / f"{model}.minimal.json").write_text(json.dumps({"minimal_depth": depth}))
    return out


def test_the_calibrated_plan_lands_within_a_quarter_of_each_measured_experiment(found):
    cfg, jobs = real()
    measured = read_measured(ROOT / MEASURED)
    got = {c["experiment"]: c for c in compare(cpu_hours(cfg, jobs, results=found), measured)}
    assert set(got) == set(experiments())
    assert got["inputs"]["plan_h"] is None   # downloads and conversion: no model runs
    for exp, c in got.items():
        if c["plan_h"] is None:
            continue
        # a quarter of the measured hours; a row of seconds (the heatmaps: 0.2 min at most) within 3 min
        assert abs(c["plan_h"] - c["measured_h"]) <= max(0.25 * c["measured_h"], 0.05), c
        assert c["rate"].startswith("calibrated: "), c
    assert sum(c["summed_h"] for c in got.values()) == pytest.approx(10.2, abs=0.05)  # the run's 160 jobs


def test_the_rates_are_the_fit_of_the_committed_measurement(found):
    cfg, jobs = real()
    efficiency, light = fit(parts(cfg, jobs, results=found), read_measured(ROOT / MEASURED))
    assert set(efficiency) == set(CPU_EFFICIENCY) == {k for k in CALIBRATED_ON if k != "a few prompts"}
    assert efficiency == pytest.approx(CPU_EFFICIENCY, abs=0.005)
    assert light == CPU_LIGHT_WORK_S == 0.0
    # the fit reads the measurement: twice the scan's time, half its efficiency
    doubled = read_measured(ROOT / MEASURED)
    doubled.loc["kv_head_scan", "comparable_h"] *= 2
    slower, _ = fit(parts(cfg, jobs, results=found), doubled)
    assert slower["head ablations"] < 0.55 * efficiency["head ablations"]
    assert slower["lm-eval"] == pytest.approx(efficiency["lm-eval"])


def test_every_row_says_whether_it_is_calibrated_and_on_what(found):
    cfg, jobs = real()
    rows = cpu_hours(cfg, jobs, results=found)
    by = {(r["model"], r["rule"]): r for r in rows}
    assert by[QWEN, "gradual_pruning"]["rate"] == "calibrated: Fig. 2, Fig. 3, Table 1, top-k removal"
    assert by[QWEN, "head_scan"]["rate"] == "calibrated: KV head scan"
    lines = "\n".join(cpu_hour_lines(rows, cores=2, dtype="bfloat16"))
    assert "| CPU rate |" in lines and "| calibrated: Fig. 4 |" in lines and MEASURED in lines
    # a kind of work no run has timed says so
    assert kind_of({"function": "gna.plan.job_estimates:distillation_stage"}) is None
    assert calibration_note(None) == "estimate" and calibration_note("lm-eval").startswith("calibrated: ")
    section = "\n".join(comparison_lines(rows, read_measured(ROOT / MEASURED), MEASURED))
    assert "| Table 1 | 1.03 | 1.33 |" in section and "| inputs | 0.07 | 0.07 | - | - |" in section


def test_every_declared_estimator_has_a_kind_or_is_left_as_an_estimate():
    """A new estimator is sorted into a kind of work (gna.plan.cpu_rates.KIND_OF_ESTIMATOR), or is one of
    the kinds no CPU run has timed (training, tokenizing)."""
    cfg, jobs = real()
    untimed = {"gna.plan.job_estimates:aligned_student", "gna.plan.job_estimates:distillation_stage",
               "gna.plan.job_estimates:tokenized_data"}
    text = "\n".join(p.read_text() for p in (ROOT / "workflow/rules").rglob("*.smk"))
    import re

    declared = set(re.findall(r'Estimator\("([\w.:]+)"', text))
    assert declared and all(kind_of({"function": f}) or f in untimed for f in declared), declared


def test_fig3_is_sized_at_the_minimal_depth_once_gradual_pruning_has_found_it(found, tmp_path):
    cfg, _ = real()
    core = cpu_hardware(Hardware(), "bfloat16")
    known, unknown = Study(cfg, core, found), Study(cfg, core, tmp_path)
    roles = ["mmlu", "knowledge"]

    def hours(study, layer):
        return evaluation(study, {"model": QWEN, "layer": str(layer)}, roles, "minimal_minus_layer").hours

    assert known.minimal_depth(QWEN) == 24 and unknown.minimal_depth(QWEN) is None
    # before it is known, every layer's job at the deepest minimal model (27 of 28 layers): an upper bound
    assert hours(unknown, 0) == hours(unknown, 27) == pytest.approx(
        evaluation(unknown, {"model": QWEN, "depth": "27"}, roles, "depth").hours)
    # once known: 23 layers for a layer of the minimal model, start-up only past it
    assert hours(known, 0) == pytest.approx(evaluation(known, {"model": QWEN, "depth": "23"}, roles, "depth").hours)
    assert hours(known, 24) == pytest.approx(core.job_overhead_s / 3600)
    assert evaluation(known, {"model": QWEN}, roles, "minimal").hours < evaluation(unknown, {"model": QWEN}, roles,
                                                                                   "minimal").hours


def test_job_times_writes_the_csv_the_calibration_reads(tmp_path):
    """benchmarks/job_times.py --csv: a run's metadata as the measurement's rows, per experiment."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import job_times
    finally:
        sys.path.pop(0)
    meta = tmp_path / ".snakemake" / "metadata"
    meta.mkdir(parents=True)
    jobs = [("gradual_pruning", "a", 0, 600), ("gradual_pruning", "a", 0, 600.000001),   # one job, two outputs
            ("gradual_pruning", "b", 700, 1900), ("batch_kv_pairs_0", "c", 0, 360), ("findings", "d", 0, 3)]
    for i, (rule, h, start, end) in enumerate(jobs):
        (meta / f"f{i}").write_text(json.dumps({"rule": rule, "job_hash": h, "starttime": start, "endtime": end}))
    out = tmp_path / "times.csv"
    job_times.main([str(tmp_path), "--csv", str(out)])
    assert out.read_text().startswith("# Job time per experiment")
    got = read_measured(out)
    assert list(got.reset_index().columns) == COLUMNS
    assert got.loc["fig2_gradual_pruning", "jobs"] == 2 and got.loc["fig2_gradual_pruning", "summed_h"] == 0.5
    assert got.loc["fig2_gradual_pruning", "longest_min"] == 20.0
    assert got.loc["fig4_kv_pairs", "rules"] == "kv_pairs (batched)" and got.loc["fig4_kv_pairs", "summed_h"] == 0.1
    assert got.loc["other", "rules"] == "findings"
