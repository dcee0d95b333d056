"""Findings on SSM masking (slides, section 5): the SSM's G&A heads masked fully or to their pattern.

The claim-checks layer of the experiment ``ssm_masking``. One concept at three layers:
:mod:`gna.experiments.ssm_masking` masks the heads, :mod:`gna.report.ssm_masking` draws the table,
this module judges it.
"""
from __future__ import annotations

from pathlib import Path

from ..common import chance_of, near_chance
from .paper import effect
from .sampled import n_of, part, read_answers
from .verdicts import judge, judged, not_applicable, read_table, with_settings


def ssm_masking(fig: Path, settings: dict | None = None, answers: str | None = None,
                tasks: dict | None = None) -> list[dict]:
    """Masking the SSM's G&A heads fully takes MMLU to chance, keeping their pattern keeps it; n/a
    where the unmodified model is near chance on MMLU. Where the questions' number is known
    (:func:`.sampled.n_of`), two parts on their intervals (:mod:`gna.report.verdict`): the fall fully
    masked beyond 15 points, the fall with the pattern kept within 10; each paired on the modes' answers
    where the jobs kept them (``answers``: a template of ``model`` and ``mode``; ``tasks["mmlu"]``)."""
    st = with_settings(settings)
    chance = chance_of("mmlu", st["mmlu_chance"])
    t = read_table(fig, "ssm_masking.csv")
    if t is None:
        return []
    rows = []
    claim = "Slides: masking the SSM's G&A heads fully takes MMLU to chance; keeping only their G&A pattern keeps it"
    for model, sub in t.groupby("model", sort=False):
        s = sub.set_index("condition")
        if not {"none", "full", "pattern"} <= set(s.index):
            continue
        none, full, pat = s.loc["none", "mmlu"], s.loc["full", "mmlu"], s.loc["pattern", "mmlu"]
        if near_chance(none, chance, 100):
            rows.append(not_applicable(claim, model, f"the unmodified model is near chance on MMLU ({none:.1f})"))
            continue
        ok = near_chance(full, chance, 100) and pat >= none - 10 and none - full >= 15
        verdict, tested = judge(ok, pat > full + 5), ""
        n = n_of(st, "mmlu")
        if n:   # the paper gives no number: the lines alone refute
            paper = effect("ssm_pattern").scaled(none / 100, chance)
            kept = {m: read_answers(answers, model=model, mode=m) for m in ("none", "full", "pattern")}
            mmlu = (tasks or {}).get("mmlu", ())
            verdict, tested = judged([part("MMLU's fall fully masked", none / 100, full / 100, n, 0.15, paper,
                                           answers=(kept["none"], kept["full"], mmlu)),
                                      part("MMLU's fall with the pattern kept", none / 100, pat / 100, n, 0.10,
                                           above=False, answers=(kept["none"], kept["pattern"], mmlu))],
                                     f"{n} questions")
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"MMLU none {none:.1f}, full {full:.1f}, pattern {pat:.1f}; knowledge "
                                  f"{s.loc['none', 'knowledge']:.1f} / {s.loc['full', 'knowledge']:.1f} / "
                                  f"{s.loc['pattern', 'knowledge']:.1f} ({s.heads.iloc[0]}, {s.selection.iloc[0]})"
                                  + tested))
    return rows
