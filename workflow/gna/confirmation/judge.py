"""The confirmation's verdicts: each picked part judged on the fresh items only, by the one verdict rule
(:mod:`gna.report.verdict`), its line and the paper's effect recomputed at the fresh reference's
accuracies; the screen's estimate beside it, labelled as the screen's.

A part's two conditions are paired on the fresh items both scored: each task's first ``n / tasks`` (the
fresh files are in random order, so any prefix is a simple random sample of what the screen left).
"""
from __future__ import annotations

import math

import pandas as pd

from ..evaluation.paired import pooled
from ..evaluation.power import detectable_from_interval, paired_detectable
from ..report.findings.sampled import level_z
from ..report.verdict import Part, claim_verdict, t_interval
from .parts import PartSpec, line_of, paper_of, reference

ALPHA = 0.05


def per_task(n: int, tasks) -> int:
    """A role's items per task: its pooled ``n`` shared equally over its tasks."""
    return math.ceil(n / max(len(list(tasks)), 1))


def head(answers: pd.DataFrame, tasks, n: int) -> pd.DataFrame:
    """The first ``n`` pooled items of ``tasks`` (each task's first ``per_task``)."""
    keep = per_task(n, tasks)
    return answers[answers.task.isin(list(tasks)) & (answers.doc_id < keep)]


def _tasks(role: str, screen: dict) -> list[str]:
    return list(screen["tasks"].get(role, [role]))


def paired_part(spec: PartSpec, found: dict, screen: dict, st: dict) -> Part:
    """``spec`` on the fresh answers ``found`` (condition id -> answers), at its level (Bonferroni's for
    the extreme of ``m``)."""
    tasks = _tasks(spec.role, screen)
    c = pooled(head(found[spec.first], tasks, spec.n), head(found[spec.second], tasks, spec.n), tasks)
    low, high = c.interval(level_z(spec.m))
    ref = reference(found[spec.first], screen, "retrieval" if spec.claim == "topk" else "mmlu")
    detectable = paired_detectable(c.n, discordance=max((c.first_only + c.second_only) / c.n, 1 / c.n),
                                   alpha=ALPHA / max(spec.m, 1))
    return Part(spec.name, c.difference, low, high, line_of(spec.line_rule, ref, st), spec.above,
                paper_of(spec, ref, st), detectable, soi=st["smallest_effect"] if spec.line_rule == "zero" else None,
                n=c.n, paired=True, method=(f"{c.first_only} answers lost, {c.second_only} gained; McNemar p "
                                            f"{c.p_value:.2g}" + (f"; the extreme of {spec.m}" if spec.m > 1 else "")))


def growth_part(spec: PartSpec, found: dict, screen: dict, st: dict) -> Part:
    """Fig. 4's growth: the drop at the most pairs minus the drop at the fewest, each paired on its own
    fresh prompts, their intervals combined by square-and-add (MOVER)."""
    drops = []
    for full, ablated, role in ((spec.first, spec.second, spec.role), spec.pair):
        tasks = _tasks(role, screen)
        c = pooled(head(found[full], tasks, spec.n), head(found[ablated], tasks, spec.n), tasks)
        drops.append((c.difference, *c.interval()))
    (d1, l1, h1), (d0, l0, h0) = drops
    est = d1 - d0
    low = est - math.sqrt((d1 - l1) ** 2 + (h0 - d0) ** 2)
    high = est + math.sqrt((h1 - d1) ** 2 + (d0 - l0) ** 2)
    return Part(spec.name, est, low, high, st["growth"], True, None, detectable_from_interval(low, high),
                n=spec.n, paired=None, method="two paired drops on their own prompts, combined (MOVER)")


def draws_part(spec: PartSpec, found: dict, screen: dict, st: dict) -> Part:
    """Random minus ranked at the draw level: each draw's difference on the same fresh items, Student's
    t interval over the draws."""
    tasks = _tasks(spec.role, screen)
    ranked = head(found[spec.first], tasks, spec.n)
    diffs = [pooled(head(found[d], tasks, spec.n), ranked, tasks).difference for d in spec.draws]
    mean, low, high, detectable = t_interval(diffs)
    return Part(spec.name, mean, low, high, 0.0, True, None, detectable, soi=st["smallest_effect"], n=len(diffs),
                paired=None, method=f"{len(diffs)} draws, t interval")


def margin_beside(spec: PartSpec, found: dict, screen: dict) -> str:
    """The same comparison on each prompt's log-prob margin of the right answer (paired, a t interval
    over the prompts; shown beside the verdict, which stays on accuracy): a KV part's only, where the
    answers carry margins."""
    roles = [spec.role] + ([spec.pair[2]] if spec.pair else [])
    if not all(r.startswith("kv") for r in roles):
        return ""

    def margins(cid, role):
        a = head(found[cid], _tasks(role, screen), spec.n)
        a = a[a.metric == "acc"].set_index(["task", "doc_id"]).margin
        return a.astype(float)

    if spec.line_rule == "growth":
        (full, ablated, role), (f0, a0, r0) = (spec.first, spec.second, spec.role), spec.pair
        hi, lo = (margins(full, role) - margins(ablated, role)).dropna(), (margins(f0, r0) - margins(a0, r0)).dropna()
        if hi.empty or lo.empty:
            return ""
        est = hi.mean() - lo.mean()
        se = math.sqrt(hi.var(ddof=1) / len(hi) + lo.var(ddof=1) / len(lo))
        what = "growth of the margin's drop"
    else:
        diffs = [(margins(d, spec.role) - margins(spec.first, spec.role)).dropna().mean() for d in spec.draws]
        if len(diffs) < 2 or any(math.isnan(x) for x in diffs):
            return ""
        est, low, high, _ = t_interval(diffs)
        return f"log-prob margin, random minus ranked {est:+.2f} [{low:+.2f}, {high:+.2f}] nats ({len(diffs)} draws)"
    return f"{what} {est:+.2f} [{est - 1.96 * se:+.2f}, {est + 1.96 * se:+.2f}] nats (paired per prompt)"


def judge(plan: dict, answers: dict, screen: dict, st: dict) -> list[dict]:
    """One row per claim picked: its verdict from the fresh parts, the parts, and each part's screen
    estimate beside it. ``answers``: claim -> condition id -> the fresh answers (the confirmation's only);
    ``screen``: the task names and chances only (``tasks``, ``chance``; the fresh KV tasks as kv<pairs>)."""
    rows = []
    for claim, picked in plan["claims"].items():
        specs = [PartSpec(**{**p, "pair": tuple(p["pair"]) if p["pair"] else None}) for p in picked["parts"]]
        parts, found = [], answers[claim]
        for s in specs:
            if s.n <= 0:
                continue
            parts.append(growth_part(s, found, screen, st) if s.line_rule == "growth"
                         else draws_part(s, found, screen, st) if s.draws else paired_part(s, found, screen, st))
        if not parts:
            continue
        beside = [m for m in (margin_beside(s, found, screen) for s in specs if s.n > 0) if m]
        rows.append({"claim": claim, "verdict": claim_verdict(parts), "parts": parts, "beside": beside,
                     "screen": {s.name: s.screen.get("drop") for s in specs},
                     "needed": {s.name: s.n_needed for s in specs if s.capped}})
    return rows
