"""The head scan's methods side by side in a study's plan: per scanned model, the ``head_scan`` job
under ``exact`` and under ``atp+exact``. The one source of every ratio the preset, the manual and
the plan quote."""
from __future__ import annotations

from dataclasses import replace

from . import estimate as E
from .cpu_rates import CPU_EFFICIENCY, CPU_LIGHT_WORK_S
from .estimate import Hardware
from .job_estimates import head_scan
from .jobs import Study

SCAN_METHODS = ("exact", "atp+exact")


def scan_methods(config: dict, hw: Hardware | None = None, models=None) -> list[dict]:
    """Per scanned model, the ``head_scan`` job under each of :data:`SCAN_METHODS` with the config's
    other scan settings: heads, the scan's seconds, the job's (start-up and the weights' load added),
    their ratios exact / atp+exact and each method's peak GPU GB; and each method's job on one CPU core
    (``<method>_cpu_h``): the same FLOPs at ``Hardware.cpu_gflops`` (the dtype's) times the head
    ablations' calibrated efficiency (gna.plan.cpu_rates). The one source of every ratio the preset, the
    manual and the plan quote."""
    hw = hw or Hardware()
    cpu = cpu_hardware(hw, config.get("dtype"), "head ablations")
    out = []
    for name in (models or config["scan"]["models"]):
        info = Study(config, hw).info(name)
        row: dict = {"model": name, "heads": sum(h for (_, _, h) in info.heads_by_layer)}
        for method in SCAN_METHODS:
            study = {**config, "scan": {**config["scan"], "method": method}}
            est = head_scan(Study(study, hw), {"model": name})
            row[f"{method}_cpu_h"] = head_scan(Study(study, cpu), {"model": name}).hours
            row[f"{method}_job_s"] = est.hours * 3600
            row[f"{method}_scan_s"] = row[f"{method}_job_s"] - E.load_seconds(hw, info)
            row[f"{method}_gpu_gb"] = est.gpu_gb
        row["scan_ratio"] = row["exact_scan_s"] / row["atp+exact_scan_s"]
        row["job_ratio"] = row["exact_job_s"] / row["atp+exact_job_s"]
        out.append(row)
    return out


def cpu_gflops(hw: Hardware, dtype: str | None = "float32") -> float:
    """One CPU core's measured rate for a study's ``dtype``: ``Hardware.cpu_gflops_bf16`` in bfloat16,
    else ``Hardware.cpu_gflops`` (float32's)."""
    return hw.cpu_gflops_bf16 if dtype == "bfloat16" else hw.cpu_gflops


def cpu_hardware(hw: Hardware, dtype: str | None = "float32", kind: str | None = None) -> Hardware:
    """``hw`` with one CPU core's measured rate (:func:`cpu_gflops`) in place of the GPU's forward rate,
    and a CPU job's start-up, task building and checkpoint read in place of a GPU cluster's. ``kind``:
    the kind of work (gna.plan.cpu_rates), whose calibrated efficiency scales the rate."""
    return replace(hw, fwd_tflops=cpu_gflops(hw, dtype) * CPU_EFFICIENCY.get(kind, 1.0) / 1e3,
                   job_overhead_s=hw.cpu_job_overhead_s, task_setup_s=hw.cpu_task_setup_s, load_gbs=hw.cpu_load_gbs,
                   # the fitted read carries HF generate's Python too: no overhead per layer apart
                   bandwidth_gbs=hw.cpu_bandwidth_gbs, decode_overhead_per_layer_s=0.0,
                   light_work_s=CPU_LIGHT_WORK_S)


def scan_method_lines(rows: list[dict], hw: Hardware | None = None, dtype: str | None = "float32") -> list[str]:
    """The plan's markdown table of :func:`scan_methods` (``dtype``: the study's, for the CPU rate)."""
    lines = ["", "## Head scan: exact against atp+exact", "",
             "Per `head_scan` job with this config's scan settings (`scan.method` set to each; the job adds "
             "start-up and the weights' load). docs/fast-scan.md says how far atp+exact's ranking is trusted.", "",
             "| model | heads | exact scan (s) | atp+exact scan (s) | scan ratio | job ratio | peak GB exact / atp+exact |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['heads']:,} | {r['exact_scan_s']:,.0f} | {r['atp+exact_scan_s']:,.0f} | "
                     f"{r['scan_ratio']:.1f}x | {r['job_ratio']:.1f}x | "
                     f"{r['exact_gpu_gb']:.1f} / {r['atp+exact_gpu_gb']:.1f} |")
    hw = hw or Hardware()
    lines += ["", "## Head scan on a CPU", "",
              f"The same jobs on one CPU core: the same FLOPs at the exact scan's measured {rate_name(dtype)}, "
              f"{cpu_gflops(hw, dtype):g} GFLOP/s per core, times {CPU_EFFICIENCY['head ablations']:g}, what the "
              f"real study's scans reached (gna.plan.cpu_rates; the rate: benchmarks/scan_cpu_real.py; measured "
              f"on a transformer: SSM rows keep the GPU's family factors and are not measured). With t threads a "
              f"job takes up to t times less wall time. docs/performance.md has the measurement.", "",
              "| model | heads | exact CPU h | atp+exact CPU h | exact GPU h | atp+exact GPU h |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['heads']:,} | {r['exact_cpu_h']:,.1f} | {r['atp+exact_cpu_h']:,.1f} | "
                     f"{r['exact_job_s'] / 3600:.2f} | {r['atp+exact_job_s'] / 3600:.2f} |")
    return lines


def rate_name(dtype: str | None) -> str:
    """The rate :func:`cpu_gflops` takes for ``dtype``, named as the plan says it."""
    return ("bfloat16 rate (`Hardware.cpu_gflops_bf16`)" if dtype == "bfloat16"
            else "float32 rate (`Hardware.cpu_gflops`)")
