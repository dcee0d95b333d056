"""Findings on the head scan: SSM vs transformer redundancy at an equal share of heads.

The claim-checks layer of the experiment ``scan``. One concept at three layers:
:mod:`gna.experiments.head_scan` ranks the heads, :mod:`gna.report.head_scan` draws the ranking, this
module judges it.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ...evaluation.power import detectable_from_interval
from ..verdict import Part, claim_verdict, evidence
from .paper import effect
from .sampled import drop_interval
from .verdicts import judge, read_table, with_settings

REDUNDANCY_SHARE = 0.10
"""SSM vs transformer redundancy is compared on the top heads covering this share of each model's heads."""


def _sum_interval(drops: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """A signed sum of (estimate, low, high) intervals by square-and-add (MOVER; their correlation
    ignored: drops on the same prompts), each term's sign in its estimate's tuple already."""
    est = sum(d for d, _, _ in drops)
    return (est, est - math.sqrt(sum((d - lo) ** 2 for d, lo, _ in drops)),
            est + math.sqrt(sum((hi - d) ** 2 for d, _, hi in drops)))


def _drop_iv(r, n: int, sign: int = 1) -> tuple[float, float, float]:
    """A ranking row's KV drop (full accuracy minus the head's) with its Newcombe-Wilson interval, times ``sign``."""
    d, lo, hi = drop_interval(r["accuracy"] + r["drop"], r["accuracy"], n)
    return (d, lo, hi) if sign > 0 else (-d, -hi, -lo)


def redundancy(fig: Path, share: float = REDUNDANCY_SHARE, rankings: dict | None = None,
               settings: dict | None = None) -> list[dict]:
    """SSM vs transformer redundancy, like with like. The models' heads differ in number per layer
    (micro: 4 attention heads per layer vs 8 Mamba-2 heads per layer, both 16 wide), so each
    model's heads are compared at an equal *share*: the summed single-head KV drops of its top
    ceil(share x heads) heads (the KV lost, head by head, by the same share of its heads; the SSM,
    with more heads, sums more of them: the comparison leans against the claim), beside the top
    head's drop (one head of the same width). Holds where both are smaller for every SSM than for
    every transformer; partly where one is. ``rankings``: {model: its full ranking csv} (the scan's);
    without them, figures/head_ranking.csv (its top heads only: the share is of those). Where the
    probe's prompts are known (``task_n["kv"]`` or ``kv_n``), each of the two is a part judged by
    :mod:`gna.report.verdict` on the interval of the least transformer-minus-SSM difference (each
    drop's Newcombe-Wilson interval, combined by square-and-add; no paper number: the slides say
    "smaller drops" in words)."""
    if rankings:
        t = pd.concat([pd.read_csv(p).assign(model=m) for m, p in rankings.items()], ignore_index=True)
    else:
        t = read_table(fig, "head_ranking.csv")
    if t is None:
        return []
    kinds = t.groupby("model").kind.agg(lambda k: "attention" if set(k) == {"attention"} else
                                        ("hybrid" if "attention" in set(k) else "ssm"))
    models = list(dict.fromkeys(t.model))
    att = [m for m in models if kinds[m] == "attention"]
    ssm = [m for m in models if kinds[m] == "ssm"]
    if not att or not ssm:
        return []
    stats = {}
    for m in att + ssm:
        sub = t[t.model == m].sort_values("rank")
        n = len(sub)
        top = max(1, math.ceil(share * n))
        per_layer = sub.groupby("layer").size()
        stats[m] = dict(n=n, top=top, single=float(sub["drop"].iloc[0]), summed=float(sub["drop"].head(top).sum()),
                        per_layer=int(per_layer.max()))
    single = max(stats[m]["single"] for m in ssm) < min(stats[m]["single"] for m in att)
    summed = max(stats[m]["summed"] for m in ssm) < min(stats[m]["summed"] for m in att)
    verdict, tested = judge(single and summed, single or summed), ""
    st = with_settings(settings)
    prompts = (st.get("task_n") or {}).get("kv") or st.get("kv_n")
    if prompts and "accuracy" in t:
        n, parts = int(prompts), []
        for label, top in (("top head's", lambda m: 1), (f"top {share:.0%}'s summed", lambda m: stats[m]["top"])):
            diffs = [_sum_interval([_drop_iv(r, n) for _, r in t[t.model == a].sort_values("rank").head(top(a)).iterrows()]
                                   + [_drop_iv(r, n, -1) for _, r in t[t.model == b].sort_values("rank").head(top(b)).iterrows()])
                     for a in att for b in ssm]
            d, lo, hi = min(diffs, key=lambda x: x[0])
            parts.append(Part(f"transformer minus SSM, the {label} KV drop", d, lo, hi, 0.0,
                              paper=effect("redundancy").scaled(1.0, 0.0), detectable=detectable_from_interval(lo, hi),
                              soi=st["smallest_effect"], n=n, paired=False,
                              method="unpaired: two models' drops on the same prompts, combined by square-and-add"))
        verdict = claim_verdict(parts)
        tested = f"; n = {n} prompts; {evidence(parts)}"
    return [dict(claim="SSM G&A is more redundant: a single SSM head matters less than the transformer's top head",
                 model=", ".join(att + ssm), verdict=verdict,
                 evidence=f"KV drop of the top {share:.0%} of each model's heads, summed over single-head ablations: "
                          + ", ".join(f"{m} {v['summed']:.2f} ({v['top']} of {v['n']} heads, {v['per_layer']} per layer)"
                                      for m, v in stats.items())
                          + "; top head alone: " + ", ".join(f"{m} {v['single']:.2f}" for m, v in stats.items())
                          + tested)]
