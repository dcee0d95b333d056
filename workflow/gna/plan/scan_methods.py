"""The head scan's methods side by side in a study's plan: per scanned model, the ``head_scan`` job
under ``exact`` and under ``atp+exact``. The one source of every ratio the preset, the manual and
the plan quote."""
from __future__ import annotations

from . import estimate as E
from .estimate import Hardware
from .jobs import Study, estimate_job

SCAN_METHODS = ("exact", "atp+exact")


def scan_methods(config: dict, hw: Hardware | None = None, models=None) -> list[dict]:
    """Per scanned model, the ``head_scan`` job under each of :data:`SCAN_METHODS` with the config's
    other scan settings: heads, the scan's seconds, the job's (start-up and the weights' load added),
    their ratios exact / atp+exact and each method's peak GPU GB. The one source of every ratio the
    preset, the manual and the plan quote."""
    hw = hw or Hardware()
    out = []
    for name in (models or config["scan"]["models"]):
        info = Study(config, hw).info(name)
        row: dict = {"model": name, "heads": sum(h for (_, _, h) in info.heads_by_layer)}
        for method in SCAN_METHODS:
            est = estimate_job(Study({**config, "scan": {**config["scan"], "method": method}}, hw), "head_scan",
                               {"model": name}, True)
            row[f"{method}_job_s"] = est.hours * 3600
            row[f"{method}_scan_s"] = row[f"{method}_job_s"] - E.load_seconds(hw, info)
            row[f"{method}_gpu_gb"] = est.gpu_gb
        row["scan_ratio"] = row["exact_scan_s"] / row["atp+exact_scan_s"]
        row["job_ratio"] = row["exact_job_s"] / row["atp+exact_job_s"]
        out.append(row)
    return out


def scan_method_lines(rows: list[dict]) -> list[str]:
    """The plan's markdown table of :func:`scan_methods`."""
    lines = ["", "## Head scan: exact against atp+exact", "",
             "Per `head_scan` job with this config's scan settings (`scan.method` set to each; the job adds "
             "start-up and the weights' load). docs/fast-scan.md says how far atp+exact's ranking is trusted.", "",
             "| model | heads | exact scan (s) | atp+exact scan (s) | scan ratio | job ratio | peak GB exact / atp+exact |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['heads']:,} | {r['exact_scan_s']:,.0f} | {r['atp+exact_scan_s']:,.0f} | "
                     f"{r['scan_ratio']:.1f}x | {r['job_ratio']:.1f}x | "
                     f"{r['exact_gpu_gb']:.1f} / {r['atp+exact_gpu_gb']:.1f} |")
    return lines
