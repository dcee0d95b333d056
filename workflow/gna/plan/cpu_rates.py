"""The plan's CPU rates per kind of work, calibrated on a measured run where one exists.

A CPU job's seconds are its FLOPs (the same count as the GPU estimate: token-layers of the forwards
it runs, the LM head at the positions it scores) at one core's rate, plus start-up and the load. The
base rate is the exact scan's measured one (``Hardware.cpu_gflops``, ``cpu_gflops_bf16``); a kind of
work whose jobs were timed in a real run runs at ``CPU_EFFICIENCY[kind]`` times it. The factor is per
FLOP, not per job: a change to what a job computes (all depths from one forward, a shared prefix)
changes its FLOPs and keeps the rate. ``gna.plan.cpu_calibration.fit`` derives every factor here from
the committed measurement (``MEASURED``); tests/test_plan_calibration.py holds them to it.
"""
from __future__ import annotations

MEASURED = "benchmarks/results/real_study_job_times.csv"
"""The measurement (repository-relative): the real-model study's job time per experiment, bf16, one
torch thread per job, on the 2-core development machine."""
MEASURED_STUDY = "real"
"""The study (its config's ``study``) that ``MEASURED`` timed."""
MEASURED_CONFIG = "benchmarks/results/real_study_job_times.config.yaml"
"""The config ``MEASURED`` timed (repository-relative): the rates are fitted on its jobs, and a plan of
that config shows itself beside the measurement (a later preset of the same study sizes its jobs
otherwise, so its hours would not compare)."""

# estimator (gna.experiments.registry's Estimator function) -> the kind of work its jobs do
KIND_OF_ESTIMATOR = {
    **{f"gna.plan.job_estimates:{f}": "lm-eval" for f in (
        "evaluation", "critical_heads", "masked_mixers", "masked_positions", "swapped_layer", "mmlu_sample",
        "distilled_student", "baseline_task", "evaluation_and_probe")},   # a KV control is a small part   # baseline_task's KV probe runs through lm-eval too
    "gna.plan.job_estimates:probe_pairs": "kv probe",
    # the scan and the open questions' repeated forwards: ablated rows through the layers after the head
    "gna.plan.job_estimates:head_scan": "head ablations",
    **{f"gna.plan.question_rows:{f}": "head ablations" for f in (
        "head_sets", "format_scans", "one_scan", "seed_scans", "path_patching")},
    "gna.plan.job_estimates:mixing_patterns": "a few prompts",
    "gna.plan.job_estimates:models_loaded": "a few prompts",
}

CPU_EFFICIENCY = {"lm-eval": 1.03, "kv probe": 1.04, "head ablations": 1.37}
"""Achieved rate over the base rate, per kind, fitted on the experiments of ``CALIBRATED_ON``: lm-eval's
loglikelihood items (MMLU's letter and its cloze form at every depth, without a layer, with heads
ablated) and the KV probe's scoring run at about the scan's measured rate; the scan's jobs (AtP and
the exact rows of Qwen's candidates, SmolLM2's 270 heads exactly, the G&A classification) at 1.37
times it: the plan counts more FLOPs for them than they take."""

CPU_LIGHT_WORK_S = 0.0
"""A job that loads models and reads a few prompts' patterns (heatmaps, the explorer's patterns):
seconds besides start-up and the load, in place of the GPU plan's three minutes. ga_heatmaps, both
models loaded, took 0.2 min at most, less than the plan's start-up and load already count."""

CALIBRATED_ON = {
    "lm-eval": ("fig2_gradual_pruning", "fig3_individual_pruning", "table1_head_keeping", "topk_heads"),
    "kv probe": ("fig4_kv_pairs",),
    "head ablations": ("kv_head_scan",),
    "a few prompts": ("heatmaps_explorer",),
}
"""Per kind, the experiments (rows of ``MEASURED``) its rate is fitted on."""

LABELS = {"inputs": "inputs", "fig2_gradual_pruning": "Fig. 2", "fig3_individual_pruning": "Fig. 3",
          "kv_head_scan": "KV head scan", "table1_head_keeping": "Table 1", "fig4_kv_pairs": "Fig. 4",
          "topk_heads": "top-k removal", "heatmaps_explorer": "heatmaps"}


def kind_of(estimator: dict | None) -> str | None:
    """The kind of work of a rule's declared estimator (``{"function": ...}``), None for none."""
    return KIND_OF_ESTIMATOR.get((estimator or {}).get("function", ""))


def calibration_note(kind: str | None) -> str:
    """What a plan row's CPU hours rest on: "calibrated: <experiments>" or "estimate"."""
    if kind not in CALIBRATED_ON:
        return "estimate"
    return "calibrated: " + ", ".join(LABELS[e] for e in CALIBRATED_ON[kind])
