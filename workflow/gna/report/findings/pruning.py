"""Findings on layer pruning: Fig. 2 (cutting layers from the end) and Fig. 3 (one critical layer).

Both read ``layer_pruning.csv``; :func:`minimal_scores` gives the minimal model's scores to the
head checks, which compare against it.

One concept at three layers: :mod:`gna.experiments.pruning` runs it, :mod:`gna.report.pruning`
draws it, this module judges it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ...experiments.pruning import below_floor
from ..common import chance_of, near_chance
from ..verdict import HOLDS, PARTLY, REFUTED, UNRESOLVED, claim_verdict, evidence
from .paper import effect
from .sampled import PAPER_LLAMA_8B, acc, drop, n_of, part, picked, read_answers
from .verdicts import judge, knowledge_line, knowledge_untestable, read_table, with_settings


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


def _depths_picked_among(g: pd.DataFrame) -> int:
    """The depths the minimal one (and so the depth of the fall below it) is picked among: every cut depth
    the run scored, from one layer fewer than the full model's down to the shallowest."""
    return max(1, int((g.depth < g.depth.max()).sum()))


def gradual(fig: Path, settings: dict | None = None, answers: str | None = None,
            tasks: dict | None = None) -> list[dict]:
    """Fig. 2's shape: MMLU within ``tolerance`` of the full model's at every depth from the full one
    down to the minimal depth (which must cut at least one layer), and at the first depth below it a
    collapse (at least ``collapse`` of the full model's above-chance MMLU lost). 'holds' needs both.
    Where the questions' number is known (``task_n`` or ``mmlu_n``: :func:`.sampled.n_of`) the two
    are parts judged by :mod:`gna.report.verdict` on their intervals: MMLU's drop to the lowest held
    depth (to one layer fewer where none can be cut) within ``tolerance`` against the paper's none,
    and its drop below the minimal depth beyond ``collapse`` of the above-chance MMLU against the
    paper's fall to chance. The depth of the fall is a pick (the first depth past the tolerance), so its
    interval is Bonferroni-adjusted for the cut depths it is picked among; the held part needs no
    adjustment: it is the worst of the held depths, each of which must stay (an intersection-union
    test, at its level as it stands). Paired where the jobs kept their answers: ``answers``, a depth's answers
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
                          answers=(full_answers, read_answers(answers, model=model, depth=minimal - 1), mmlu_tasks),
                          m=_depths_picked_among(g))]
            verdict = claim_verdict(parts)
            m = _depths_picked_among(g)
            fall = drop(full.mmlu, below.mmlu.iloc[0], n,
                        (full_answers, read_answers(answers, model=model, depth=minimal - 1), mmlu_tasks), m=m)
            sampled = (f"; MMLU {fall.text} from the full model to {minimal - 1} layers"
                       + (f" ({picked(m)})" if m > 1 else ""))
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


def _tested(template: str | None, model: str) -> dict | None:
    """The critical-layers json of ``model`` (rule critical_layers: the paired test's verdicts), or None
    without a template or where this run has none (an older run: the table's point estimates)."""
    path = Path(template.format(model=model)) if template else None
    return json.loads(path.read_text()) if path is not None and path.is_file() else None


def _none_critical(tested: dict | None) -> str:
    """Why no layer is critical: none is, or (by the critical-layers json) the sample leaves layers open."""
    if tested is None or not tested.get("undecided_layers"):
        return "no layer collapses MMLU with knowledge kept: no critical layer"
    floor = below_floor(tested)
    return (f"no layer shown critical; without {', '.join(f'L{x}' for x in tested['undecided_layers'])} MMLU "
            "collapses, knowledge neither shown to stay nor to go" + (f"; {floor}" if floor else ""))


def _margin(tested: dict) -> float:
    """The knowledge margin (accuracy) the critical-layers json tested against."""
    return float(tested["layers"][0]["knowledge_margin"]) if tested["layers"] else float("nan")


def individual(fig: Path, settings: dict | None = None, answers: str | None = None,
               removed_answers: str | None = None, tasks: dict | None = None,
               critical_json: str | None = None) -> list[dict]:
    """Fig. 3 holds where some layer is critical: its removal loses at least ``collapse`` of the
    minimal model's MMLU above chance while knowledge stays. The layers shown (and judged) are the
    critical ones, else the collapsed ones, else the one with the lowest MMLU: by the critical-layers json
    where the run has one (``critical_json``, a template of ``model``: :func:`gna.experiments.pruning.critical_table`'s
    test, McNemar with Holm over the layers and the knowledge interval within its margin, the layers
    Table 1 keeps heads in), else by the table's point estimates within the knowledge margin (:func:`.verdicts.knowledge_line`).
    A layer is "collapsed" only where its MMLU loss passes the json's Holm-corrected test as well as the
    ``collapse`` share. Where the questions' number is known (:func:`.sampled.n_of`: ``task_n`` or
    ``mmlu_n``) each shown layer has two parts judged by :mod:`gna.report.verdict`: MMLU's drop beyond
    ``collapse`` of the above-chance MMLU against the paper's fall to chance, with an interval adjusted
    for the layers it was picked among (Bonferroni, 1 - 0.05/m: a shown layer is the extreme of, or the
    survivor of a Holm test over, the m layers), and knowledge's drop within the margin (the json's, the
    same ``knowledge_margin`` rule as :func:`.verdicts.knowledge_line`) against the paper's none; paired where the jobs kept their
    answers: the minimal model's (``answers``, as for :func:`gradual`) against the layer's
    (``removed_answers``, a template of ``model`` and ``layer``), ``tasks`` the columns' tasks. Without
    it, the thresholds on the point estimates. At most 'partly' where the minimal model's knowledge is
    near ``knowledge_chance`` (its staying cannot fail)."""
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
        tested = _tested(critical_json, model)
        if tested is None:
            critical = collapsed[collapsed.knowledge >= base.knowledge - knowledge_line(base.knowledge, st)]
        else:   # the paired test's verdicts, the ones Table 1 keeps heads by
            # "collapsed" only where the corrected test passes too (the point estimate's share alone is no finding)
            named = {"collapsed": {f"L{r['layer']}" for r in tested["layers"] if r["collapsed"] and r["significant"]},
                     "critical": {f"L{r['layer']}" for r in tested["layers"] if r["critical"]}}
            collapsed, critical = sub[sub.layers.isin(named["collapsed"])], sub[sub.layers.isin(named["critical"])]
        if not critical.empty:
            verdict = "holds"
            shown = critical
        else:
            verdict = "partly" if not collapsed.empty else "does not hold"
            shown = collapsed if not collapsed.empty else sub.loc[[sub.mmlu.idxmin()]]
        n, n_kn = n_of(st, "mmlu"), n_of(st, "knowledge")
        drops, tested_parts = {}, {}
        if n and n_kn:   # each shown layer's two parts on their intervals, paired where the jobs kept answers
            minimal_answers = read_answers(answers, model=model, depth=int(base.depth))
            margin = (_margin(tested) if tested is not None and tested["layers"]
                      else knowledge_line(base.knowledge, st))
            family = len(tested["layers"]) if tested is not None and tested["layers"] else len(sub)
            kn = effect("fig3_knowledge")
            kn_chance = st.get("knowledge_chance")
            kn_chance = kn.chance / 100 if kn_chance is None else kn_chance
            for r in shown.itertuples():   # the critical layers where there are any
                removed = read_answers(removed_answers, model=model, layer=int(str(r.layers).removeprefix("L")))
                pairs = {role: (minimal_answers, removed, (tasks or {}).get(role, ())) for role in ("mmlu", "knowledge")}
                drops[r.layers] = {role: drop(getattr(base, role), getattr(r, role), size, pairs[role])
                                   for role, size in (("mmlu", n), ("knowledge", n_kn))}
                tested_parts[r.layers] = [
                    part(f"MMLU drop without {r.layers}", base.mmlu, r.mmlu, n, collapse * (base.mmlu - chance),
                         effect("fig3_critical").scaled(base.mmlu, chance), answers=pairs["mmlu"], m=family),
                    part(f"knowledge drop without {r.layers}", base.knowledge, r.knowledge, n_kn, margin,
                         kn.scaled(base.knowledge, kn_chance), above=False, answers=pairs["knowledge"])]
            verdict = _some_layer([claim_verdict(p) for p in tested_parts.values()])
        # near chance, knowledge staying says nothing; knowledge shown to fall is a result all the same
        fell = any(p.verdict == REFUTED for ps in tested_parts.values() for p in ps if p.name.startswith("knowledge"))
        untestable = "" if fell else knowledge_untestable(base.knowledge, st)
        verdict = "partly" if untestable and verdict == "holds" else verdict
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"minimal model MMLU {acc(base.mmlu, n)}, knowledge {acc(base.knowledge, n_kn)}; "
                                  + "; ".join(f"without {r.layers}: MMLU {acc(r.mmlu, n)}, knowledge {acc(r.knowledge, n_kn)}"
                                              + (f" (MMLU {drops[r.layers]['mmlu'].text}, knowledge "
                                                 f"{drops[r.layers]['knowledge'].text})" if r.layers in drops else "")
                                              for r in shown.itertuples())
                                  + ("" if not critical.empty else f" ({_none_critical(tested)})")
                                  + ("" if tested is None else
                                     f" (tested on each answer: MMLU loss by McNemar, Holm over {len(tested['layers'])} "
                                     f"layers; knowledge interval within +-{_margin(tested):.3f})")
                                  + (f" ({untestable})" if untestable else "")
                                  + (f"; {evidence([p for ps in tested_parts.values() for p in ps])}"
                                     if tested_parts else "")
                                  + (f". {PAPER_LLAMA_8B['individual']}" if st.get("paper_beside") else "")))
    return rows


def _some_layer(verdicts: list[str]) -> str:
    """Fig. 3's verdict from its shown layers' (each by :func:`gna.report.verdict.claim_verdict`): the
    claim is that *some* layer is critical, so one layer that holds carries it; an unresolved layer
    leaves it open; layers each decided, none holding, refute it (``partly`` where some layer's MMLU
    collapse is shown and its knowledge is not kept)."""
    if HOLDS in verdicts:
        return HOLDS
    open_ = [v for v in verdicts if v.startswith(UNRESOLVED)]
    if open_:   # the underpowered wording where a layer has it
        return next((v for v in open_ if v != UNRESOLVED), UNRESOLVED)
    return PARTLY if PARTLY in verdicts else REFUTED


def minimal_scores(fig: Path, model: str, tolerance: float) -> tuple[float, float] | None:
    """The minimal model's (MMLU, knowledge) in percent, from layer_pruning.csv, or None."""
    found = minimal_model(fig, model, tolerance)
    return found[1:] if found is not None else None


def minimal_model(fig: Path, model: str, tolerance: float) -> tuple[int, float, float] | None:
    """The minimal model's (depth, MMLU, knowledge), scores in percent, from layer_pruning.csv, or None."""
    t = read_table(fig, "layer_pruning.csv")
    if t is None or model not in set(t.model):
        return None
    g = _gradual_rows(t, model)
    if g.empty:
        return None
    depth = _minimal_depth(g, tolerance)
    r = g[g.depth == depth].iloc[0]
    return depth, 100 * float(r.mmlu), 100 * float(r.knowledge)
