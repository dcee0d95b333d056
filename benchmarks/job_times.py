"""Summed job time of a Snakemake run, per rule, from the run's metadata (`.snakemake/metadata`).

    python benchmarks/job_times.py [WORKDIR]     # default: the current directory

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


def main(argv: list[str]) -> None:
    times = job_times(argv[0] if argv else ".")
    rows = sorted(((sum(v), len(v), r) for r, v in times.items()), reverse=True)
    print(f"{'rule':28s} {'jobs':>5s} {'summed s':>9s} {'mean s':>7s}")
    for total, n, rule in rows:
        print(f"{rule:28s} {n:5d} {total:9.1f} {total / n:7.1f}")
    print(f"{'total':28s} {sum(n for _, n, _ in rows):5d} {sum(t for t, _, _ in rows):9.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
