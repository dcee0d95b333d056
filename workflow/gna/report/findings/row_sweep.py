"""Findings on the row-mask sweep (section 5.3): where a head set aggregates, position set by position set.

The claim-checks layer of the experiment ``row_sweep``. One concept at three layers:
:mod:`gna.experiments.row_sweep` masks the rows, :mod:`gna.report.row_sweep` draws the table, this
module judges it (and names the aggregation site :mod:`.hybrid_attention`'s evidence cites).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from .paper import effect
from .sampled import part, read_answers
from .verdicts import judge, judged, not_applicable, read_table, with_settings


# Where a verdict can be aggregated: the answer position or the options' own positions. The
# question's tokens are where its content is read: masking them cuts what there is to aggregate.
AGGREGATION_SITES = ("answer", "option_values", "option_letters", "option_closers")


def aggregation_site(s: pd.DataFrame) -> tuple[str, float, float]:
    """(site, its MMLU drop, the answer row's drop) of one head set's sweep rows (index: condition)."""
    drops = s["drop"][[c for c in AGGREGATION_SITES if c in s.index]]
    return drops.idxmax(), float(drops.max()), float(drops["answer"])




def row_sweep(fig: Path, settings: dict | None = None, answers: str | None = None,
              tasks: dict | None = None) -> list[dict]:
    """Where a head set aggregates (row-mask sweep): of the aggregation sites, the position set whose
    masking costs MMLU most. Holds where that is the answer position (the paper's reading of section
    5.3) and it costs 15 points or more; partly where the answer row costs 15 or more but an option
    set costs more; does not hold otherwise, the evidence naming where the heads aggregate instead.
    n/a where the unmasked model is near chance on MMLU. With the table's ``n`` (questions), two parts
    on their intervals (:mod:`gna.report.verdict`): the answer row's fall beyond 15 points against the
    paper's (the official last-row mask's 64.3 -> 34.9, scaled), and the answer row costing more than
    the costliest other aggregation site (no paper number): each paired on the conditions' answers where
    the job kept them (``answers``: a template of ``model`` and ``head_set``, one table of every condition,
    told apart by its ``condition`` column; ``tasks["mmlu"]``). The rival is the costliest of the others,
    so the comparison with it is the hardest of them, not a pick that favours the claim: no
    multiplicity to pay."""
    st = with_settings(settings)
    chance = chance_of("mmlu", st["mmlu_chance"])
    t = read_table(fig, "row_sweep.csv")
    if t is None:
        return []
    rows = []
    for (model, head_set), sub in t.groupby(["model", "head_set"], sort=False):
        s = sub.set_index("condition")
        claim = f"Section 5.3: the {head_set} heads aggregate at the answer position (row-mask sweep)"
        if "none" not in s.index or "answer" not in s.index:
            continue
        if near_chance(s.loc["none", "mmlu"], chance, 100):
            rows.append(not_applicable(claim, model,
                                       f"the unmasked model is near chance on MMLU ({s.loc['none', 'mmlu']:.1f})"))
            continue
        where, most, last = aggregation_site(s)
        if most >= 15:
            verdict = judge(where == "answer" and last >= 15, last >= 15)
            place = f"they aggregate at {where} (-{most:.1f})" + ("" if where == "answer" else
                                                                   f"; the answer row costs {last:.1f}")
        else:
            verdict = "does not hold"
            rest = s["drop"].get("all_but_answer")
            place = ("no aggregation site costs 15 points: the aggregation is spread"
                     + ("" if rest is None or pd.isna(rest) else f" (all but the answer: -{rest:.1f})"))
        evidence = (f"MMLU unmasked {s.loc['none', 'mmlu']:.1f}; masked at " + ", ".join(
            f"{c} {s.loc[c, 'mmlu']:.1f}" for c in s.index if c != "none") + f": {place}")
        if "n" in s and pd.notna(s.loc["none", "n"]):
            n, none = int(s.loc["none", "n"]), s.loc["none", "mmlu"] / 100
            others = [c for c in AGGREGATION_SITES if c in s.index and c != "answer"]
            rival = max(others, key=lambda c: s.loc[c, "drop"]) if others else None
            kept = read_answers(answers, model=model, head_set=head_set)

            def of(condition: str) -> pd.DataFrame | None:
                return None if kept is None or "condition" not in kept else kept[kept.condition == condition]
            mmlu = (tasks or {}).get("mmlu", ())
            parts = [part("the answer row's MMLU fall", none, s.loc["answer", "mmlu"] / 100, n, 0.15,
                          effect("hybrid_attention").scaled(none, chance), answers=(of("none"), of("answer"), mmlu))]
            if rival:
                parts.append(part(f"the answer row's fall beyond {rival}'s", s.loc[rival, "mmlu"] / 100,
                                  s.loc["answer", "mmlu"] / 100, n, 0.0, soi=st["smallest_effect"],
                                  answers=(of(rival), of("answer"), mmlu)))
            verdict, tested = judged(parts, f"{n} questions")
            evidence += tested
        rows.append(dict(claim=claim, model=model, verdict=verdict, evidence=evidence))
    return rows
