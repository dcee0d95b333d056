"""Findings on layer pruning: Fig. 2 (cutting layers from the end) and Fig. 3 (one critical layer).

Both read ``layer_pruning.csv``; :func:`minimal_scores` gives the minimal model's scores to the
head checks, which compare against it.

One concept at three layers: :mod:`gna.experiments.pruning` runs it, :mod:`gna.report.pruning`
draws it, this module judges it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple

import pandas as pd

from ...experiments.pruning import below_floor
from ..common import chance_of, near_chance
from ..verdict import HOLDS, PARTLY, REFUTED, UNRESOLVED, Part, claim_verdict, evidence
from .paper import effect
from .sampled import PAPER_LLAMA_8B, acc, drop, n_of, part, picked, read_answers
from .verdicts import (capped, judge, knowledge_chance, knowledge_line, knowledge_untestable, not_applicable,
                       read_table, with_settings)


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
    are parts judged by :mod:`gna.report.verdict` on their intervals (:func:`_gradual_parts`). Paired
    where the jobs kept their answers: ``answers``, a depth's answers (a template of ``model`` and
    ``depth``), and ``tasks``, ``{"mmlu": [...], "knowledge": [...]}``, the tasks of the table's
    columns. Without it, the thresholds on the point estimates (:func:`_gradual_shape`)."""
    st = with_settings(settings)
    t = read_table(fig, "layer_pruning.csv")
    if t is None:
        return []
    chance = chance_of("mmlu", st["mmlu_chance"])
    claim = "Fig. 2: cutting layers from the end, MMLU holds then collapses to chance"
    rows = []
    for model in dict.fromkeys(t[t.experiment == "gradual"].model):
        g = _gradual_rows(t, model)
        full = g.iloc[-1]
        if near_chance(full.mmlu, chance):
            rows.append(not_applicable(claim, model, f"the full model is near chance on MMLU ({full.mmlu:.2f})"))
            continue
        shape = _gradual_shape(g, st, chance)
        verdict = judge(shape.held and shape.collapsed, shape.held or shape.collapsed)
        n = n_of(st, "mmlu")
        sampled, tested = "", ""
        if n and not shape.below.empty:   # each part against its line and the paper's effect, with its interval
            pairs = _depth_answers(answers, model, (tasks or {}).get("mmlu", ()))
            parts, sampled = _gradual_parts(g, shape, st, chance, n, pairs)
            verdict, tested = claim_verdict(parts), f"; {evidence(parts)}"
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=_gradual_evidence(g, shape, n, n_of(st, "knowledge")) + sampled
                                  + (f" (failed: {'; '.join(shape.failed)})" if shape.failed else "") + tested
                                  + (f". {PAPER_LLAMA_8B['gradual']}" if st.get("paper_beside") else "")))
    return rows


class _Shape(NamedTuple):
    """Fig. 2's shape on one model's depths, on the point estimates."""

    minimal: int            # the minimal depth
    kept: pd.DataFrame      # the depths from the full model's down to the minimal one
    below: pd.DataFrame     # the depth one under the minimal (empty where there is none)
    lost: float             # the share of the full model's above-chance MMLU lost there
    cut: bool               # the minimal depth cuts a layer
    held: bool              # cut, and MMLU within the tolerance down to it
    collapsed: bool         # at least ``collapse`` of the above-chance MMLU lost below it
    failed: list[str]       # what of the shape fails, in words


def _gradual_shape(g: pd.DataFrame, st: dict, chance: float) -> _Shape:
    """Fig. 2's checks on the point estimates of one model's depths (``g``, by :func:`_gradual_rows`)."""
    full, tol = g.iloc[-1], st["tolerance"]
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
    return _Shape(minimal, kept, below, lost, cut, within and cut, collapsed, failed)


def _depth_answers(template: str | None, model: str, tasks) -> Callable[[int, int], tuple]:
    """The ``answers`` of :func:`.sampled.part` for two of ``model``'s depths: (first's, second's, tasks)."""
    return lambda first, second: (read_answers(template, model=model, depth=first),
                                  read_answers(template, model=model, depth=second), tasks)


def _gradual_parts(g: pd.DataFrame, shape: _Shape, st: dict, chance: float, n: int,
                   pairs: Callable[[int, int], tuple]) -> tuple[list[Part], str]:
    """Fig. 2's two parts, and the fall's drop as the evidence prints it: MMLU's drop to the lowest held
    depth (to one layer fewer where none can be cut) within ``tolerance`` against the paper's none, and
    its drop below the minimal depth beyond ``collapse`` of the above-chance MMLU against the paper's
    fall to chance. The depth of the fall is a pick (the first depth past the tolerance), so its interval
    is Bonferroni-adjusted for the cut depths it is picked among; the held part needs no adjustment: it
    is the worst of the held depths, each of which must stay (an intersection-union test, at its level
    as it stands). ``pairs(first depth, second depth)``: the two depths' answers."""
    full, minimal, below = g.iloc[-1], shape.minimal, shape.below.iloc[0]
    depth = int(full.depth)
    # the lowest accuracy of a cut depth that is held (the shallowest among equals); one layer fewer
    # where none is cut
    cut_kept = shape.kept[shape.kept.depth < full.depth]
    held_at = (cut_kept.assign(key=cut_kept.mmlu.round(9)).sort_values(["key", "depth"]).iloc[0] if shape.cut
               else below)
    m = _depths_picked_among(g)
    parts = [part(f"MMLU drop to {int(held_at.depth)} layers (held)", full.mmlu, held_at.mmlu, n,
                  st["tolerance"], effect("fig2_held").scaled(full.mmlu, chance), above=False,
                  answers=pairs(depth, int(held_at.depth))),
             part(f"MMLU drop to {minimal - 1} layers (collapse)", full.mmlu, below.mmlu, n,
                  st["collapse"] * (full.mmlu - chance), effect("fig2_collapse").scaled(full.mmlu, chance),
                  answers=pairs(depth, minimal - 1), m=m)]
    fall = drop(full.mmlu, below.mmlu, n, pairs(depth, minimal - 1), m=m)
    return parts, (f"; MMLU {fall.text} from the full model to {minimal - 1} layers"
                   + (f" ({picked(m)})" if m > 1 else ""))


def _gradual_evidence(g: pd.DataFrame, shape: _Shape, n: int | None, n_kn: int | None) -> str:
    """Fig. 2's accuracies as the findings print them: the full model's, the least held, the fall, the
    shallowest depth, knowledge from the full to the shallowest."""
    full, first, minimal, below = g.iloc[-1], g.iloc[0], shape.minimal, shape.below
    return (f"MMLU {acc(full.mmlu, n)} at {int(full.depth)} layers, at least "
            f"{acc(shape.kept.mmlu.min(), n)} down to the minimal depth {minimal}"
            + (f"; {acc(below.mmlu.iloc[0], n)} at {minimal - 1} ({shape.lost:.0%} of the above-chance "
               f"MMLU lost)" if not below.empty else "")
            + (f"; {acc(first.mmlu, n)} at {int(first.depth)}" if first.depth < minimal - 1 else "")
            + f"; knowledge {acc(full.knowledge, n_kn)} -> {acc(first.knowledge, n_kn)}")


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
    critical ones, else the collapsed ones, else the one with the lowest MMLU (:func:`_shown_layers`):
    by the critical-layers json where the run has one (``critical_json``, a template of ``model``), else
    by the table's point estimates. Where the questions' number is known (:func:`.sampled.n_of`:
    ``task_n`` or ``mmlu_n``) each shown layer has two parts judged by :mod:`gna.report.verdict`
    (:func:`_layer_parts`), paired where the jobs kept their answers: the minimal model's (``answers``,
    as for :func:`gradual`) against the layer's (``removed_answers``, a template of ``model`` and
    ``layer``), ``tasks`` the columns' tasks. Without it, the thresholds on the point estimates. At
    most 'partly' where the minimal model's knowledge is near ``knowledge_chance`` (its staying cannot
    fail)."""
    st = with_settings(settings)
    chance = chance_of("mmlu", st["mmlu_chance"])
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
            rows.append(not_applicable(claim, model, f"the minimal model is near chance on MMLU ({base.mmlu:.2f})"))
            continue
        tested = _tested(critical_json, model)
        verdict, shown, critical = _shown_layers(sub, base, tested, st, chance)
        n, n_kn = n_of(st, "mmlu"), n_of(st, "knowledge")
        drops, tested_parts = {}, {}
        if n and n_kn:   # each shown layer's two parts on their intervals, paired where the jobs kept answers
            pairs = _removal_answers(answers, removed_answers, model, int(base.depth), tasks or {})
            for r in shown.itertuples():   # the critical layers where there are any
                drops[r.layers], tested_parts[r.layers] = _layer_parts(r, base, sub, tested, st, chance, n, n_kn, pairs)
            verdict = _some_layer([claim_verdict(p) for p in tested_parts.values()])
        # near chance, knowledge staying says nothing; knowledge shown to fall is a result all the same
        fell = any(p.verdict == REFUTED for ps in tested_parts.values() for p in ps if p.name.startswith("knowledge"))
        untestable = "" if fell else knowledge_untestable(base.knowledge, st)
        evidence_ = (f"minimal model MMLU {acc(base.mmlu, n)}, knowledge {acc(base.knowledge, n_kn)}; "
                     + "; ".join(f"without {r.layers}: MMLU {acc(r.mmlu, n)}, knowledge {acc(r.knowledge, n_kn)}"
                                 + (f" (MMLU {drops[r.layers]['mmlu'].text}, knowledge "
                                    f"{drops[r.layers]['knowledge'].text})" if r.layers in drops else "")
                                 for r in shown.itertuples())
                     + ("" if not critical.empty else f" ({_none_critical(tested)})")
                     + ("" if tested is None else
                        f" (tested on each answer: MMLU loss by McNemar, Holm over {len(tested['layers'])} "
                        f"layers; knowledge interval within +-{_margin(tested):.3f})")
                     + (f" ({untestable})" if untestable else "")
                     + (f"; {evidence([p for ps in tested_parts.values() for p in ps])}" if tested_parts else "")
                     + (f". {PAPER_LLAMA_8B['individual']}" if st.get("paper_beside") else ""))
        rows.append(dict(claim=claim, model=model, verdict=capped(verdict, untestable), evidence=evidence_))
    return rows


def _shown_layers(sub: pd.DataFrame, base, tested: dict | None, st: dict,
                  chance: float) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """(the verdict on the point estimates, the layers shown, the critical layers) of one model's removals
    (``sub``) from its minimal model (``base``). By the critical-layers json where there is one (``tested``:
    :func:`gna.experiments.pruning.critical_table`'s test, McNemar with Holm over the layers and the
    knowledge interval within its margin, the layers Table 1 keeps heads in; a layer "collapsed" only where
    its MMLU loss passes the Holm-corrected test as well as the ``collapse`` share), else by the table's
    point estimates within the knowledge margin (:func:`.verdicts.knowledge_line`)."""
    lost = (base.mmlu - sub.mmlu) / (base.mmlu - chance)
    collapsed = sub[lost >= st["collapse"]]
    if tested is None:
        critical = collapsed[collapsed.knowledge >= base.knowledge - knowledge_line(base.knowledge, st)]
    else:   # the paired test's verdicts, the ones Table 1 keeps heads by
        # "collapsed" only where the corrected test passes too (the point estimate's share alone is no finding)
        named = {"collapsed": {f"L{r['layer']}" for r in tested["layers"] if r["collapsed"] and r["significant"]},
                 "critical": {f"L{r['layer']}" for r in tested["layers"] if r["critical"]}}
        collapsed, critical = sub[sub.layers.isin(named["collapsed"])], sub[sub.layers.isin(named["critical"])]
    if not critical.empty:
        return "holds", critical, critical
    shown = collapsed if not collapsed.empty else sub.loc[[sub.mmlu.idxmin()]]
    return ("partly" if not collapsed.empty else "does not hold"), shown, critical


def _removal_answers(template: str | None, removed_template: str | None, model: str, depth: int,
                     tasks: dict) -> Callable[[int, str], tuple]:
    """The ``answers`` of :func:`.sampled.part` for the minimal model (``depth`` layers) against it
    without a layer: ``pairs(layer, role)`` -> (minimal's, removed's, the role's tasks)."""
    minimal = read_answers(template, model=model, depth=depth)
    return lambda layer, role: (minimal, read_answers(removed_template, model=model, layer=layer), tasks.get(role, ()))


def _layer_parts(r, base, sub: pd.DataFrame, tested: dict | None, st: dict, chance: float, n: int, n_kn: int,
                 pairs: Callable[[int, str], tuple]) -> tuple[dict, list[Part]]:
    """({role: its drop}, its two parts) of one shown layer ``r``: MMLU's drop beyond ``collapse`` of the
    above-chance MMLU against the paper's fall to chance, with an interval adjusted for the layers it was
    picked among (Bonferroni, 1 - 0.05/m: a shown layer is the extreme of, or the survivor of a Holm test
    over, the m layers), and knowledge's drop within the margin (the critical-layers json's, the same
    ``knowledge_margin`` rule as :func:`.verdicts.knowledge_line`) against the paper's none."""
    margin = _margin(tested) if tested is not None and tested["layers"] else knowledge_line(base.knowledge, st)
    family = len(tested["layers"]) if tested is not None and tested["layers"] else len(sub)
    kn = effect("fig3_knowledge")
    layer = int(str(r.layers).removeprefix("L"))
    answers = {role: pairs(layer, role) for role in ("mmlu", "knowledge")}
    drops = {role: drop(getattr(base, role), getattr(r, role), size, answers[role])
             for role, size in (("mmlu", n), ("knowledge", n_kn))}
    return drops, [
        part(f"MMLU drop without {r.layers}", base.mmlu, r.mmlu, n, st["collapse"] * (base.mmlu - chance),
             effect("fig3_critical").scaled(base.mmlu, chance), answers=answers["mmlu"], m=family),
        part(f"knowledge drop without {r.layers}", base.knowledge, r.knowledge, n_kn, margin,
             kn.scaled(base.knowledge, knowledge_chance(st, kn)), above=False, answers=answers["knowledge"])]


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
