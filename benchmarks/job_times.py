"""Summed job time of a Snakemake run, per rule, from the run's metadata (`.snakemake/metadata`).

    python benchmarks/job_times.py [WORKDIR] [--csv OUT]   # default: the current directory

``--csv``: the times per experiment as the plan's CPU rates are calibrated on them
(benchmarks/results/real_study_job_times.csv, gna.plan.cpu_calibration); commit the file of a real run.

Snakemake records a start and end time per output file; a job's outputs share its rule and job
hash and overlap in time, so a job is counted once. The sum is CPU-occupancy of the jobs (each runs one torch thread), not the wall
time of the run: on 2 cores the wall time is about half of it plus the tail of the DAG.
"""
from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path


def batched_rule(rule: str) -> str:
    """``batch_<rule>_<i>`` (several conditions of <rule> in one job, workflow/rules/batch.smk) ->
    ``<rule> (batched)``; any other rule as it is."""
    m = re.fullmatch(r"batch_(\w+)_\d+", rule)
    return f"{m[1]} (batched)" if m else rule


def job_times(workdir: str | Path = ".") -> dict[str, list[float]]:
    """rule -> seconds of each of its jobs."""
    spans: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for f in (Path(workdir) / ".snakemake" / "metadata").iterdir():
        try:
            m = json.loads(f.read_text())
        except (ValueError, OSError):
            continue
        start, end, rule = m.get("starttime"), m.get("endtime"), m.get("rule")
        if start is None or end is None or rule is None:
            continue
        spans[(rule, m.get("job_hash"))].append((start, end))
    out = defaultdict(list)
    for (rule, _), times in spans.items():
        # one job's outputs overlap (their starts and ends differ by µs: a directory's end is
        # recorded per output); two jobs with one hash would follow one another
        jobs: list[list[float]] = []
        for start, end in sorted(times):
            if jobs and start <= jobs[-1][1]:
                jobs[-1][1] = max(jobs[-1][1], end)
            else:
                jobs.append([start, end])
        out[batched_rule(rule)] += [end - start for start, end in jobs]
    return dict(out)


def by_experiment(times: dict[str, list[float]]) -> list[dict]:
    """Per experiment of gna.plan.cpu_calibration.experiments() (rules in none: ``other``), the row
    gna.plan.cpu_calibration.read_measured reads: jobs, summed hours, the longest job."""
    from gna.plan.cpu_calibration import experiment_of, experiments

    known = experiments()
    groups: dict[str, list[str]] = {}
    for rule in times:
        groups.setdefault(experiment_of(rule.removesuffix(" (batched)")) or "other", []).append(rule)
    rows = []
    for exp in [*known, "other"]:
        if exp in groups:
            secs = [s for r in groups[exp] for s in times[r]]
            rows.append({"experiment": exp, "target": known[exp][0] if exp in known else "",
                         "rules": " ".join(sorted(groups[exp])), "jobs": len(secs),
                         "summed_h": round(sum(secs) / 3600, 2), "longest_min": round(max(secs) / 60, 1),
                         "comparable_h": round(sum(secs) / 3600, 2), "adjustment": ""})
    return rows


def write_csv(rows: list[dict], out: str | Path, workdir: str | Path) -> None:
    """``rows`` (:func:`by_experiment`) as the committed measurement's CSV, its header saying what,
    where and when; written whole or not at all."""
    import csv
    import datetime
    import io
    import os
    import platform

    from gna.io import atomic_open

    from gna.plan.cpu_calibration import COLUMNS

    buf = io.StringIO()
    buf.write(f"# Job time per experiment of the Snakemake run in {Path(workdir).resolve()}: each job's wall time\n"
              f"# summed, from its metadata (.snakemake/metadata), by benchmarks/job_times.py on {platform.node()} "
              f"({os.cpu_count()} CPUs),\n# {datetime.date.today().isoformat()}. comparable_h: the same as summed_h "
              f"(fill adjustment where the run differs from today's code).\n")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with atomic_open(out, "w") as f:
        f.write(buf.getvalue())


def main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Summed job time of a Snakemake run, per rule.")
    ap.add_argument("workdir", nargs="?", default=".")
    ap.add_argument("--csv", help="also write the per-experiment CSV the plan is calibrated on "
                                  "(benchmarks/results/real_study_job_times.csv)")
    args = ap.parse_args(argv)
    times = job_times(args.workdir)
    rows = sorted(((sum(v), len(v), r) for r, v in times.items()), reverse=True)
    print(f"{'rule':28s} {'jobs':>5s} {'summed s':>9s} {'mean s':>7s}")
    for total, n, rule in rows:
        print(f"{rule:28s} {n:5d} {total:9.1f} {total / n:7.1f}")
    print(f"{'total':28s} {sum(n for _, n, _ in rows):5d} {sum(t for t, _, _ in rows):9.1f}")
    if args.csv:
        write_csv(by_experiment(times), args.csv, args.workdir)


if __name__ == "__main__":
    main(sys.argv[1:])
