"""The confirmation's words and table: per model and claim, the verdict on the fresh items, each part's
test, the screen's estimate beside it (labelled as the screen's), and the n a capped part needed."""
from __future__ import annotations

import re

from ..report.verdict import COLUMNS, evidence
from .judge import judge

TITLES = {"fig2": "Fig. 2: cutting layers from the end, MMLU holds then collapses to chance",
          "fig3": "Fig. 3: removing one critical layer collapses MMLU, knowledge barely moves",
          "table1": "Table 1: the two G&A heads alone keep MMLU; without either, chance; knowledge flat",
          "fig4": "Fig. 4: without the Aggregate head, KV accuracy falls more as pairs grow",
          "topk": "Slides: removing the top-k KV heads hurts retrieval more than k random heads, knowledge holds"}


def _tasks(plan: dict, answers: dict) -> dict:
    """The plan's roles and, for the KV roles, the fresh probe tasks each pair count's answers hold."""
    tasks = dict(plan["tasks"])
    for by_condition in answers.values():
        for a in by_condition.values():
            for t in sorted(set(a.task)):
                m = re.match(r"kv_n(\d+)_s\d+$", str(t))
                if m:
                    tasks.setdefault(f"kv{m[1]}", [])
                    if t not in tasks[f"kv{m[1]}"]:
                        tasks[f"kv{m[1]}"].append(t)
    return tasks


def judged_rows(judged: dict, settings: dict, chance: dict) -> list[tuple[str, dict]]:
    """(model, judge row) for every model and claim."""
    out = []
    for model, (plan, answers) in judged.items():
        for row in judge(plan, answers, {"tasks": _tasks(plan, answers), "chance": chance}, settings):
            out.append((model, row))
    return out


def findings_text(judged: dict, settings: dict, chance: dict) -> str:
    lines = ["# Confirmation: the claims judged on fresh items", "",
             "Each claim's conditions, picked by the screen (the study's own sizes, `findings.md`) under "
             "`experiments.confirmation`'s rule, scored again on items disjoint from the screen's; the verdicts "
             "below read those fresh items only. *Screen* numbers are the screen's estimates of the same "
             "differences, shown beside them, not tested here.", ""]
    rows = judged_rows(judged, settings, chance)
    for claim, title in TITLES.items():
        mine = [(m, r) for m, r in rows if r["claim"] == claim]
        if not mine:
            continue
        lines += [f"## {title}"]
        for model, r in mine:
            screen = "; ".join(f"{name} {d:+.2f}" for name, d in r["screen"].items() if d is not None)
            needed = "; ".join(f"{name}: n {n} needed" for name, n in r["needed"].items())
            lines.append(f"- **{model}**: {r['verdict']}. {evidence(r['parts'])}"
                         + "".join(f"; beside the verdict, {b}" for b in r["beside"])
                         + (f" (screen: {screen})" if screen else "")
                         + (f" (capped by the budget or the caps: {needed})" if needed else ""))
        lines.append("")
    return "\n".join(lines)


def verdict_rows(judged: dict, settings: dict, chance: dict):
    """One row per part (:data:`gna.report.verdict.COLUMNS`, with the screen's estimate)."""
    import pandas as pd

    out = []
    for model, r in judged_rows(judged, settings, chance):
        for part in r["parts"]:
            out.append({**{"claim": r["claim"], "model": model}, **part.row(), "screen": r["screen"].get(part.name)})
    return pd.DataFrame(out, columns=COLUMNS + ["screen"])


def forest(table) -> object:
    """The confirmed parts as the findings' forest plot (:func:`gna.report.findings.table.figure`)."""
    from ..report.findings.table import figure

    return figure(table[COLUMNS])


def read_judged(models: list[str], pick_paths: list[str], answer_paths: list[str]) -> dict:
    """Model -> (its pick, claim -> condition -> its fresh answers), for :func:`findings_text` and
    :func:`verdict_rows`: ``pick_paths`` one pick per model; ``answer_paths`` the fresh answers of every
    claim a pick gives conditions, model by model in the pick's claim order (``<claim>.answers.csv``)."""
    import json
    from pathlib import Path

    import pandas as pd

    files, judged = iter(answer_paths), {}
    for model, path in zip(models, pick_paths):
        plan, answers = json.loads(Path(path).read_text()), {}
        for claim, part in plan["claims"].items():
            if part["conditions"]:
                f = next(files)
                if Path(f).name != f"{claim}.answers.csv":
                    raise ValueError(f"{f} is not {model}'s {claim} answers: the answers are out of the picks' order")
                a = pd.read_csv(f)
                answers[claim] = {cid: a[a.condition == cid] for cid in a.condition.unique()}
        judged[model] = (plan, answers)
    return judged
