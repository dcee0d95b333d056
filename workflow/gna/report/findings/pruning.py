"""Findings on layer pruning: Fig. 2 (cutting layers from the end) and Fig. 3 (one critical layer).

Both read ``layer_pruning.csv``; :func:`minimal_scores` gives the minimal model's scores to the
head checks, which compare against it.

One concept at three layers: :mod:`gna.experiments.pruning` runs it, :mod:`gna.report.pruning`
draws it, this module judges it.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from ..verdict import claim_verdict, evidence
from .paper import effect
from .sampled import PAPER_LLAMA_8B, acc, drop, n_of, part, read_answers, resolved
from .verdicts import judge, knowledge_untestable, read_table, with_settings


def _gradual_rows(t: pd.DataFrame, model: str) -> pd.DataFrame:
    g = t[(t.experiment == "gradual") & (t.model == model)].copy()
    if "depth" not in g or g["depth"].isna().any():
        g["depth"] = [int(str(x).split("..")[1]) + 1 for x in g.layers]
    return g.sort_values("depth").reset_index(drop=True)


def _minimal_depth(g: pd.DataFrame, tolerance: float) -> int:
    """The table's minimal depth, or (an older table) the rule of gna.experiments.pruning.minimal_depth."""
    if "minimal_depth" in g and g.minimal_depth.notna().any():
        return int(g.minimal_depth.dropna().iloc[0])
    full, depth = g.mmlu.iloc[-1], int(g.depth.iloc[-1])
    for r in g[g.depth >= min(2, depth)].sort_values("depth", ascending=False).itertuples():
        if r.mmlu < full - tolerance:
            break
        depth = int(r.depth)
    return depth


def gradual(fig: Path, settings: dict | None = None, answers: str | None = None,
            tasks: dict | None = None) -> list[dict]:
    """Fig. 2's shape: MMLU within ``tolerance`` of the full model's at every depth from the full one
    down to the minimal depth (which must cut at least one layer), and at the first depth below it a
    collapse (at least ``collapse`` of the full model's above-chance MMLU lost). 'holds' needs both.
    Where the questions' number is known (``task_n`` or ``mmlu_n``: :func:`.sampled.n_of`) the two
    are parts judged by :mod:`gna.report.verdict` on their intervals: MMLU's drop to the lowest held
    depth (to one layer fewer where none can be cut) within ``tolerance`` against the paper's none,
    and its drop below the minimal depth beyond ``collapse`` of the above-chance MMLU against the
    paper's fall to chance; paired where the jobs kept their answers: ``answers``, a depth's answers
    (a template of ``model`` and ``depth``), and ``tasks``, ``{"mmlu": [...], "knowledge": [...]}``,
    the tasks of the table's columns. Without it, the thresholds on the point estimates."""
    st = with_settings(settings)
    t = read_table(fig, "layer_pruning.csv")
    if t is None:
        return []
    chance, tol = chance_of("mmlu", st["mmlu_chance"]), st["tolerance"]
    claim = "Fig. 2: cutting layers from the end, MMLU holds then collapses to chance"
    rows = []
    for model in dict.fromkeys(t[t.experiment == "gradual"].model):
        g = _gradual_rows(t, model)
        full = g.iloc[-1]
        if near_chance(full.mmlu, chance):
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the full model is near chance on MMLU ({full.mmlu:.2f})"))
            continue
        minimal = _minimal_depth(g, tol)
        kept = g[g.depth >= minimal]
        within = bool((kept.mmlu >= full.mmlu - tol).all())
        cut = minimal < int(full.depth)
        below = g[g.depth == minimal - 1]
        lost = float((full.mmlu - below.mmlu.iloc[0]) / (full.mmlu - chance)) if not below.empty else float("nan")
        collapsed = bool(lost >= st["collapse"])
        failed = ([] if cut else [f"no layer can be cut with MMLU held (the minimal depth is the full {minimal})"])
        failed += [] if within or not cut else [f"MMLU leaves the tolerance ({tol:.2f}) between the full and the minimal depth"]
        failed += ([] if collapsed else
                   ["no depth below the minimal one" if below.empty else
                    f"no collapse below the minimal depth: {lost:.0%} of the above-chance MMLU lost, "
                    f"under {st['collapse']:.0%}"])
        holds_part = within and cut
        first = g.iloc[0]
        n, n_kn = n_of(st, "mmlu"), n_of(st, "knowledge")
        verdict = judge(holds_part and collapsed, holds_part or collapsed)
        sampled, tested = "", ""
        if n and not below.empty:   # each part against its line and the paper's effect, with its interval
            mmlu_tasks = (tasks or {}).get("mmlu", ())
            full_answers = read_answers(answers, model=model, depth=int(full.depth))
            # the lowest accuracy of a cut depth that is held (the shallowest among equals); one layer
            # fewer where none is cut
            cut_kept = kept[kept.depth < full.depth]
            held_at = (cut_kept.assign(key=cut_kept.mmlu.round(9)).sort_values(["key", "depth"]).iloc[0] if cut
                       else below.iloc[0])
            parts = [part(f"MMLU drop to {int(held_at.depth)} layers (held)", full.mmlu, held_at.mmlu, n,
                          tol, effect("fig2_held").scaled(full.mmlu, chance), above=False,
                          answers=(full_answers, read_answers(answers, model=model, depth=int(held_at.depth)),
                                   mmlu_tasks)),
                     part(f"MMLU drop to {minimal - 1} layers (collapse)", full.mmlu, below.mmlu.iloc[0], n,
                          st["collapse"] * (full.mmlu - chance), effect("fig2_collapse").scaled(full.mmlu, chance),
                          answers=(full_answers, read_answers(answers, model=model, depth=minimal - 1), mmlu_tasks))]
            verdict = claim_verdict(parts)
            fall = drop(full.mmlu, below.mmlu.iloc[0], n,
                        (full_answers, read_answers(answers, model=model, depth=minimal - 1), mmlu_tasks))
            sampled = f"; MMLU {fall.text} from the full model to {minimal - 1} layers"
            tested = f"; {evidence(parts)}"
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"MMLU {acc(full.mmlu, n)} at {int(full.depth)} layers, at least "
                                  f"{acc(kept.mmlu.min(), n)} down to the minimal depth {minimal}"
                                  + (f"; {acc(below.mmlu.iloc[0], n)} at {minimal - 1} ({lost:.0%} of the above-chance "
                                     f"MMLU lost)" if not below.empty else "")
                                  + (f"; {acc(first.mmlu, n)} at {int(first.depth)}" if first.depth < minimal - 1 else "")
                                  + f"; knowledge {acc(full.knowledge, n_kn)} -> "
                                    f"{acc(first.knowledge, n_kn)}" + sampled
                                  + (f" (failed: {'; '.join(failed)})" if failed else "") + tested
                                  + (f". {PAPER_LLAMA_8B['gradual']}" if st.get("paper_beside") else "")))
    return rows


def individual(fig: Path, settings: dict | None = None, answers: str | None = None,
               removed_answers: str | None = None, tasks: dict | None = None) -> list[dict]:
    """Fig. 3 holds where some layer is critical: its removal loses at least ``collapse`` of the
    minimal model's MMLU above chance while knowledge stays within ``knowledge_tolerance``
    (:func:`gna.experiments.pruning.critical_table`'s rule and defaults); at most 'partly' where the
    minimal model's knowledge is near ``knowledge_chance`` (its staying cannot fail). On a sample
    (``mmlu_n``) the MMLU drop must be beyond noise and its interval above the knowledge drop's,
    paired where the jobs kept their answers: the minimal model's (``answers``, as for
    :func:`gradual`) against the layer's (``removed_answers``, a template of ``model`` and ``layer``)."""
    st = with_settings(settings)
    chance, collapse, knowledge_tolerance = chance_of("mmlu", st["mmlu_chance"]), st["collapse"], st["knowledge_tolerance"]
    t = read_table(fig, "layer_pruning.csv")
    if t is None:
        return []
    rows = []
    claim = "Fig. 3: removing one critical layer collapses MMLU, knowledge barely moves"
    for model, sub in t[t.experiment != "gradual"].groupby("model", sort=False):
        g = t[(t.experiment == "gradual") & (t.model == model)]
        minimal = str(sub.experiment.iloc[0]).split("(")[1].split(")")[0]   # "minimal (0..N) minus layer"
        base = g[g.layers == minimal].iloc[0]                              # the minimal model, unablated
        if near_chance(base.mmlu, chance):
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the minimal model is near chance on MMLU ({base.mmlu:.2f})"))
            continue
        lost = (base.mmlu - sub.mmlu) / (base.mmlu - chance)
        collapsed = sub[lost >= collapse]
        critical = collapsed[collapsed.knowledge >= base.knowledge - knowledge_tolerance]
        if not critical.empty:
            verdict = "holds"
            shown = critical
        else:
            verdict = "partly" if not collapsed.empty else "does not hold"
            shown = collapsed if not collapsed.empty else sub.loc[[sub.mmlu.idxmin()]]
        n = st.get("mmlu_n")
        drops = {}
        if n:
            minimal_answers = read_answers(answers, model=model, depth=int(base.depth))
            for r in shown.itertuples():   # the critical layers where there are any
                removed = read_answers(removed_answers, model=model, layer=int(str(r.layers).removeprefix("L")))
                drops[r.layers] = {role: drop(getattr(base, role), getattr(r, role), n,
                                              (minimal_answers, removed, (tasks or {}).get(role, ())))
                                   for role in ("mmlu", "knowledge")}
        if n and not critical.empty:
            # a critical layer: MMLU's drop beyond noise and its interval above the knowledge drop's
            verdict = resolved(verdict, any(d["mmlu"].beyond and d["mmlu"].low > max(0.0, d["knowledge"].high)
                                            for d in (drops[r.layers] for r in critical.itertuples())))
        untestable = knowledge_untestable(base.knowledge, st)
        verdict = "partly" if untestable and verdict == "holds" else verdict
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"minimal model MMLU {acc(base.mmlu, n)}, knowledge {acc(base.knowledge, n)}; "
                                  + "; ".join(f"without {r.layers}: MMLU {acc(r.mmlu, n)}, knowledge {acc(r.knowledge, n)}"
                                              + (f" (MMLU {drops[r.layers]['mmlu'].text}, knowledge "
                                                 f"{drops[r.layers]['knowledge'].text})" if n else "")
                                              for r in shown.itertuples())
                                  + ("" if not critical.empty else
                                     " (no layer collapses MMLU with knowledge kept: no critical layer)")
                                  + (f" ({untestable})" if untestable else "")
                                  + (f". {PAPER_LLAMA_8B['individual']}" if st.get("paper_beside") else "")))
    return rows


def minimal_scores(fig: Path, model: str, tolerance: float) -> tuple[float, float] | None:
    """The minimal model's (MMLU, knowledge) in percent, from layer_pruning.csv, or None."""
    t = read_table(fig, "layer_pruning.csv")
    if t is None or model not in set(t.model):
        return None
    g = _gradual_rows(t, model)
    if g.empty:
        return None
    r = g[g.depth == _minimal_depth(g, tolerance)].iloc[0]
    return 100 * float(r.mmlu), 100 * float(r.knowledge)
