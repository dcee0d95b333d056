"""Findings on hybrid attention (section 5.3): a hybrid's attention heads masked or ablated.

The claim-checks layer of the experiment ``hybrid_attention``. One concept at two layers:
:mod:`gna.report.hybrid_attention` makes the table, this module judges it (the last-row mode's
evidence says where the row-mask sweep, :mod:`.row_sweep`, places the heads' aggregation).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from .paper import effect
from .row_sweep import aggregation_site
from .sampled import n_of, part, read_answers
from .verdicts import judge, judged, knowledge_line, not_applicable, read_table, with_settings


def hybrid_attention(fig: Path, settings: dict | None = None, answers: str | None = None,
                     tasks: dict | None = None, base_answers: dict | None = None) -> list[dict]:
    """Masking a hybrid's attention heads costs MMLU while knowledge holds (per mode); n/a where the
    unmodified model is near chance on MMLU. Where the questions' number is known, two parts on their
    intervals (:mod:`gna.report.verdict`): MMLU's fall beyond 15 points against the paper's (Zamba2's
    64.3 -> 34.9, scaled), knowledge's within ``knowledge_tolerance``; each paired on the two rows'
    answers where kept (``answers``: a template of ``model``, ``mode`` and ``k``, the job's label: "all"
    for every head; ``base_answers``: {model: k = 0's answers file}, the unmodified model evaluated once;
    ``tasks``: {"mmlu": [...], "knowledge": [...]})."""
    st = with_settings(settings)
    chance = chance_of("mmlu", st["mmlu_chance"])
    t = read_table(fig, "hybrid_attention.csv")
    if t is None or not {"mmlu", "knowledge"} <= set(t.columns):
        return []
    rows = []
    for (model, mode), sub in t.groupby(["model", "mode"], sort=False):
        sub = sub.sort_values("k")
        lo, hi = sub.iloc[0], sub.iloc[-1]
        e = effect("hybrid_attention")
        claim = (f"Section 5.3: masking a hybrid's attention heads ({mode}) costs MMLU, knowledge holds "
                 f"(Zamba2: {e.before:.1f} -> {e.after:.1f})")
        if near_chance(lo.mmlu, chance, 100):
            rows.append(not_applicable(claim, model, f"the unmodified model is near chance on MMLU ({lo.mmlu:.1f})"))
            continue
        mm, kn = lo.mmlu - hi.mmlu, lo.knowledge - hi.knowledge
        verdict, tested = judge(mm >= 15 and kn < mm / 2, mm > kn), ""
        n, n_kn = n_of(st, "mmlu"), n_of(st, "knowledge")
        if n and n_kn:
            before, after = (_masked_answers(r, model, mode, answers, base_answers) for r in (lo, hi))
            verdict, tested = judged(
                [part("MMLU's fall", lo.mmlu / 100, hi.mmlu / 100, n, 0.15,
                      effect("hybrid_attention").scaled(lo.mmlu / 100, chance),
                      answers=(before, after, (tasks or {}).get("mmlu", ()))),
                 part("knowledge's fall", lo.knowledge / 100, hi.knowledge / 100, n_kn,
                      knowledge_line(lo.knowledge / 100, st),
                      effect("hybrid_attention_knowledge").scaled(lo.knowledge / 100, 0.0), above=False,
                      answers=(before, after, (tasks or {}).get("knowledge", ())))],
                f"{n} MMLU, {n_kn} knowledge questions")
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"{hi.heads_masked} of the attention heads masked: MMLU {lo.mmlu:.1f} -> "
                                  f"{hi.mmlu:.1f}, knowledge {lo.knowledge:.1f} -> {hi.knowledge:.1f}"
                                  + (_sweep_note(fig, model) if mode == "last_row" else "") + tested))
    return rows


def _masked_answers(row, model: str, mode: str, template: str | None, base: dict | None) -> pd.DataFrame | None:
    """The answers behind one row of the hybrid attention table: k = 0's from ``base`` (the unmodified
    model's one evaluation), else the job's, whose file names every head "all" (the table's
    ``heads_masked`` "all <n>"), else its k."""
    if int(row.k) == 0:
        return read_answers((base or {}).get(model))
    label = "all" if str(row.heads_masked).startswith("all") else int(row.k)
    return read_answers(template, model=model, mode=mode, k=label)


def _sweep_note(fig: Path, model: str) -> str:
    """Where the row-mask sweep places the attention heads' aggregation, for the last-row finding."""
    t = read_table(fig, "row_sweep.csv")
    sub = None if t is None else t[(t.model == model) & (t.head_set == "attention")].set_index("condition")
    if sub is None or "answer" not in sub.index:
        return ""
    where, most, last = aggregation_site(sub)
    if where == "answer":
        return f"; the row-mask sweep finds the attention heads aggregating at the answer row (-{last:.1f})"
    return (f"; the row-mask sweep finds the attention heads aggregating at {where} instead (masking those rows: "
            f"-{most:.1f} against the answer row's -{last:.1f})")
