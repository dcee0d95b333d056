"""Findings on the layer swap (Fig. 7): one teacher layer swapped into the unaligned SSM.

The claim-checks layer of the experiment ``layer_swap``. One concept at two layers:
:mod:`gna.report.layer_swap` makes the table and figure, this module judges them.
"""
from __future__ import annotations

from pathlib import Path

from .paper import effect
from .sampled import n_of, part, read_answers
from .verdicts import judge, judged, knowledge_line, read_table, with_settings


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
