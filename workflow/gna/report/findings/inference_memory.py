"""Findings on inference memory: the formula against the published table. Arithmetic, not a sample:
no n of questions and no interval; the cells must equal the published ones at their precision.

The claim-checks layer of the experiment ``memory``. One concept at three layers:
:mod:`gna.experiments.inference_memory` computes, :mod:`gna.report.inference_memory` tabulates, this
module judges.
"""
from __future__ import annotations

from pathlib import Path

from .verdicts import judge, read_table


def memory(fig: Path) -> list[dict]:
    t = read_table(fig, "inference_memory.csv")
    if t is None:
        return []
    known = t[t.model != "hybrid-mohawk"]
    ok = (known["diff"].abs() < 1e-9).all()
    return [dict(claim="Inference memory formula reproduces the published table", model="(formula)",
                 verdict=judge(ok), evidence=(f"{len(known)} of {len(known)} cells equal at the published precision"
                                              if ok else f"differences: {known['diff'].tolist()}")
                 + f" (n = {len(known)} cells, exact arithmetic: no sample, so no interval)")]
