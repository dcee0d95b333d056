"""What the pick, the claims and the judge share: a condition scored on fresh items, a part to judge,
a screen comparison, and the lines and paper effects a part is read against (at the screen's accuracies
for sizing, at the fresh ones for the verdict: one definition)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..evaluation.paired import pooled
from ..report.findings.paper import at_share, effect

CLAIMS = ("fig2", "fig3", "table1", "fig4", "topk")


@dataclass
class Condition:
    """One condition scored on fresh items: ``interventions`` (:mod:`gna.interventions.vocabulary`),
    ``items`` role -> n (the most any part using it asks), ``share`` of the layers it runs (its cost);
    ``kv``: the probe's pair count where it scores KV prompts."""

    id: str
    interventions: list
    items: dict = field(default_factory=dict)
    share: float = 1.0
    kv: int | None = None


@dataclass
class PartSpec:
    """One part to judge: ``first`` minus ``second`` on ``role`` (``growth``: a difference of two
    drops, ``second`` and ``third``/``fourth`` its second pair), against a line by ``line_rule``."""

    claim: str
    name: str
    first: str
    second: str
    role: str
    above: bool
    line_rule: str
    paper: str | None = None
    m: int = 1
    pair: tuple | None = None
    draws: list = field(default_factory=list)
    screen: dict = field(default_factory=dict)
    n_needed: int | None = None
    n: int = 0
    capped: bool = False


def accuracy(answers: pd.DataFrame, tasks) -> float:
    rows = answers[answers.task.isin(list(tasks)) & (answers.metric == "acc") & (answers["filter"] == "none")]
    return float(rows.value.mean())


def screen_pair(first: pd.DataFrame, second: pd.DataFrame, tasks) -> dict:
    """The screen's paired comparison on ``tasks``: n, the two accuracies, the drop, its discordance and
    its 95% interval."""
    c = pooled(first, second, list(tasks))
    low, high = c.interval()
    return {"n": c.n, "first": c.first_accuracy, "second": c.second_accuracy, "drop": c.difference,
            "discordance": (c.first_only + c.second_only) / c.n, "low": low, "high": high}


def reference(answers: pd.DataFrame, screen: dict, retrieval_role: str = "mmlu") -> dict:
    """A reference condition's accuracies: per role it has answers for (mmlu, knowledge, retrieval), and
    ``line_role``'s accuracy and chance (the role whose above-chance sets the knowledge line: MMLU, or
    top-k's retrieval tasks; ``screen["chance"]``: task -> chance, 0 where absent)."""
    out = {}
    for role, tasks in screen["tasks"].items():
        if answers.task.isin(list(tasks)).any():
            out[role] = accuracy(answers, tasks)
    tasks = list(screen["tasks"].get(retrieval_role, ()))
    chance = screen.get("chance", {})
    out["line_role"] = retrieval_role
    out["line_chance"] = sum(chance.get(t, 0.0) for t in tasks) / max(len(tasks), 1)
    return out


def line_of(rule: str, ref: dict, st: dict) -> float:
    """The line of ``rule`` at a reference's accuracies ``ref`` (:func:`reference`)."""
    if rule == "tolerance":
        return st["tolerance"]
    if rule == "collapse":
        return st["collapse"] * max(ref["mmlu"] - st["mmlu_chance"], 0.0)
    if rule == "knowledge":
        return st["knowledge_share"] * max(ref[ref["line_role"]] - ref["line_chance"], 0.0)
    if rule == "growth":
        return st["growth"]
    if rule == "zero":
        return 0.0
    raise ValueError(f"unknown line rule {rule!r}")


def paper_of(spec: PartSpec, ref: dict, st: dict) -> float | None:
    """The paper's effect of ``spec`` scaled to a reference's accuracies (None: unpublished). Top-k's
    retrieval carries the slides' MMLU row at its share of the heads."""
    if spec.paper is None:
        return None
    claim, _, share = spec.paper.partition("@")
    e = at_share(claim, "knowledge" if spec.role == "knowledge" else "mmlu", float(share)) if share else effect(claim)
    if e is None or not e.published:
        return None
    if spec.role == "knowledge":
        return e.scaled(ref["knowledge"], st["knowledge_chance"])
    if spec.role == "retrieval":
        return e.scaled(ref["retrieval"], ref["line_chance"])
    return e.scaled(ref["mmlu"], st["mmlu_chance"])


def needed(spec: PartSpec, ref: dict, st: dict) -> float:
    """What the verdict rule asks the part's test to see (:attr:`gna.report.verdict.Part.needed`): from
    the line to the paper's scaled effect, the line's own size where the paper has none, the smallest
    effect of interest for a line at 0."""
    if spec.line_rule == "zero":
        return st["smallest_effect"]
    line, paper = line_of(spec.line_rule, ref, st), paper_of(spec, ref, st)
    return abs(paper - line) if paper is not None else abs(line)
