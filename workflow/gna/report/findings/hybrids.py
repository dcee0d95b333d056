"""Findings on masking and hybrids: the SSM's G&A heads masked (slides), a hybrid's attention heads
masked (section 5.3), one teacher layer swapped in (Fig. 7); the follow-up's hybrid distillation is
:mod:`.distilled`.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from ..verdict import Part, claim_verdict, evidence
from .paper import effect
from .sampled import n_of, part, read_answers
from .verdicts import judge, knowledge_line, read_table, with_settings


def judged(parts: list[Part], n_text: str) -> tuple[str, str]:
    """(verdict, evidence) of a claim's parts, by :mod:`gna.report.verdict`."""
    return claim_verdict(parts), f"; n = {n_text}; {evidence(parts)}"


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
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the unmodified model is near chance on MMLU ({none:.1f})"))
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
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the unmodified model is near chance on MMLU ({lo.mmlu:.1f})"))
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


# Where a verdict can be aggregated: the answer position or the options' own positions. The
# question's tokens are where its content is read: masking them cuts what there is to aggregate.
AGGREGATION_SITES = ("answer", "option_values", "option_letters", "option_closers")


def _aggregation_site(s: pd.DataFrame) -> tuple[str, float, float]:
    """(site, its MMLU drop, the answer row's drop) of one head set's sweep rows (index: condition)."""
    drops = s["drop"][[c for c in AGGREGATION_SITES if c in s.index]]
    return drops.idxmax(), float(drops.max()), float(drops["answer"])


def _sweep_note(fig: Path, model: str) -> str:
    """Where the row-mask sweep places the attention heads' aggregation, for the last-row finding."""
    t = read_table(fig, "row_sweep.csv")
    sub = None if t is None else t[(t.model == model) & (t.head_set == "attention")].set_index("condition")
    if sub is None or "answer" not in sub.index:
        return ""
    where, most, last = _aggregation_site(sub)
    if where == "answer":
        return f"; the row-mask sweep finds the attention heads aggregating at the answer row (-{last:.1f})"
    return (f"; the row-mask sweep finds the attention heads aggregating at {where} instead (masking those rows: "
            f"-{most:.1f} against the answer row's -{last:.1f})")


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
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the unmasked model is near chance on MMLU ({s.loc['none', 'mmlu']:.1f})"))
            continue
        where, most, last = _aggregation_site(s)
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


def layer_swap(fig: Path, settings: dict | None = None, answers: str | None = None,
               tasks: dict | None = None) -> list[dict]:
    """Swapping the best teacher layer in lifts MMLU by 10 points, knowledge moving less than half that.
    Where the questions' number is known, two parts on their intervals (:mod:`gna.report.verdict`):
    MMLU's gain beyond 10 points against the paper's (Llamba-8B's 33 -> 50, scaled to the headroom),
    knowledge's fall within ``knowledge_tolerance``; each paired on the two conditions' answers where
    kept (``answers``: a template of ``teacher`` and ``condition``, none or layer<i>; ``tasks``). The best
    layer is chosen on these same questions, so its gain is the largest of the layers swapped: judged
    at Bonferroni's level for their number. Knowledge's fall is read at that layer, not picked on it."""
    st = with_settings(settings)
    t = read_table(fig, "layer_swap.csv")
    if t is None or not (t.layer < 0).any():
        return []
    base, sw = t[t.layer < 0].iloc[0], t[t.layer >= 0]
    best = sw.loc[sw.mmlu.idxmax()]
    gain, kn = best.mmlu - base.mmlu, abs(best.knowledge - base.knowledge)
    e = effect("layer_swap")
    verdict, tested = judge(gain >= 10 and kn < gain / 2, gain >= 5), ""
    n, n_kn = n_of(st, "mmlu"), n_of(st, "knowledge")
    if n and n_kn:
        none, swapped = (read_answers(answers, teacher=base.teacher, condition=c)
                         for c in ("none", f"layer{int(best.layer)}"))
        verdict, tested = judged(
            [part("MMLU's gain", best.mmlu / 100, base.mmlu / 100, n, 0.10, e.scaled(base.mmlu / 100, 0.25),
                  answers=(swapped, none, (tasks or {}).get("mmlu", ())), m=len(sw)),
             part("knowledge's fall", base.knowledge / 100, best.knowledge / 100, n_kn,
                  knowledge_line(base.knowledge / 100, st),
                  effect("layer_swap_knowledge").scaled(base.knowledge / 100, 1 / 3), above=False,
                  answers=(none, swapped, (tasks or {}).get("knowledge", ())))],
            f"{n} MMLU, {n_kn} knowledge questions (the best of {len(sw)} layers, chosen on them)")
    return [dict(claim=f"Fig. 7: swapping one teacher layer into the unaligned SSM lifts MMLU "
                       f"(Llamba-8B: {e.before:.0f} -> {e.after:.0f} with L17), knowledge unchanged", model=str(base.model),
                 verdict=verdict,
                 evidence=f"no swap: MMLU {base.mmlu:.1f}, knowledge {base.knowledge:.1f}; best {best.swapped}: "
                          f"MMLU {best.mmlu:.1f}, knowledge {best.knowledge:.1f}" + tested)]
