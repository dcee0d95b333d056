"""Findings on the follow-up's hybrid distillation: KV retrieval with the top heads kept, knowledge
and perplexity as heads are kept, the ranked heads against random ones, and KV by SSM state.

The claim-checks layer of the experiment ``hybrid_distillation``. One concept at three layers:
:mod:`gna.experiments.hybrid_distillation` evaluates the students (trained by :mod:`gna.hybrid`),
:mod:`gna.report.hybrid_distillation` makes its tables and figure, this module judges them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...probes.kv import is_probe_task
from ..common import fmt_spread, near_chance
from ..verdict import Part, t_interval
from .paper import effect
from .sampled import n_of, part, read_answers
from .verdicts import judge, judged, knowledge_line, not_applicable, read_table, with_settings


def _kv_n(st: dict, rows: pd.DataFrame) -> int | None:
    """The prompts behind a hybrid table's KV score: per probe set (``task_n["kv"]`` or ``kv_n``)
    times its probe seeds."""
    prompts = (st.get("task_n") or {}).get("kv") or st.get("kv_n")
    seeds = int(rows.probe_seeds.dropna().max()) if "probe_seeds" in rows and rows.probe_seeds.notna().any() else 1
    return int(prompts) * seeds if prompts else None


def distillation(fig: Path, settings: dict | None = None, results: str | None = None,
                 seeds: list[int] | None = None, state_size: int | None = None, answers: str | None = None,
                 tasks: dict | None = None) -> list[dict]:
    """:func:`distillation_findings` on this run's hybrid_heads / hybrid_state_size tables; each random
    student's KV score read from its result table (``results``, a template of ``variant``: one student
    per k and draw ``seeds``, at ``state_size``) for the draw-level test of ranked against random;
    ``answers`` and ``tasks``: as :func:`distillation_findings` takes them."""
    draws = None
    if results and seeds and state_size is not None:
        def score(k: int, selection: str) -> float | None:
            path = Path(results.format(variant=f"k{k}-s{state_size}-{selection}"))
            if not path.is_file():
                return None
            t = pd.read_csv(path)
            kv = t[(t.task == "kv_retrieval") & (t.metric == "top1")]
            if kv.empty:
                return None
            by_seed = kv.groupby(kv["probe_seed"].fillna(0) if "probe_seed" in kv else pd.Series(0, index=kv.index))
            return float(by_seed.value.mean().mean())
        draws = {"score": score, "seeds": list(seeds)}
    return distillation_findings(read_table(fig, "hybrid_heads.csv"), read_table(fig, "hybrid_state_size.csv"),
                                 settings, draws, answers, tasks)


def _paired(template: str | None, first, second, tasks) -> tuple | None:
    """The ``answers`` of :func:`.sampled.part` for two students (table rows, by their ``variant``): their
    answers on ``tasks``, or on every probe seed's KV top-1 (``tasks`` "kv": its probe sets' tasks,
    metric top1, that the first kept), pooled; None where either kept none (an older result)."""
    if template is None or "variant" not in first or "variant" not in second:
        return None
    a, b = (read_answers(template, variant=r["variant"]) for r in (first, second))
    if a is None or b is None:
        return None
    if tasks == "kv":
        kv = a[(a.metric == "top1") & a.task.map(is_probe_task)]
        tasks = [(t, "top1") for t in sorted(set(kv.task))]
    return (a, b, tasks) if tasks else None


def _kv(r, digits: int = 1) -> str:
    """A row's KV retrieval, "mean [min, max]" where it has a spread."""
    lo, hi = r.get("kv_retrieval_min"), r.get("kv_retrieval_max")
    if lo is None or pd.isna(lo) or lo == hi == r["kv_retrieval"]:
        return f"{r['kv_retrieval']:.{digits}f}"
    return fmt_spread(r["kv_retrieval"], lo, hi, f".{digits}f")


def _kv_named(t: pd.DataFrame) -> str:
    """Which KV metric ``kv_retrieval`` of a hybrid table is, with the multiple choice beside it."""
    name = t.kv_metric.dropna().iloc[0] if "kv_metric" in t and t.kv_metric.notna().any() else "multiple choice"
    return f"KV-Ret, {name}"


def _mc(rows: pd.DataFrame, key: str) -> str:
    """The multiple-choice KV scores of ``rows`` (column kv_mc), labelled by ``key``, where the table has them."""
    if "kv_mc" not in rows or rows.kv_mc.isna().all():
        return ""
    return "; multiple choice over the values " + ", ".join(f"{key}={r[key]:g} {r.kv_mc:.1f}"
                                                          for _, r in rows.iterrows() if pd.notna(r.kv_mc))


def distillation_findings(heads: pd.DataFrame | None, state: pd.DataFrame | None,
                          settings: dict | None = None, draws: dict | None = None, answers: str | None = None,
                          tasks: dict | None = None) -> list[dict]:
    """The follow-up's claims on hybrid_heads / hybrid_state_size. KV retrieval is the mean over the
    probe seeds; a random row's over its draws, with [min, max] the spread. The ranked heads beat
    random ones only where the ranked student retrieves more than *every* draw of random heads
    (:func:`ranked_vs_random`). n/a where the teacher itself is near chance on KV retrieval (chance
    1 / pairs; taken as 0 here, the pairs not being in the table). Where the prompts and questions are
    known (``task_n`` or ``kv_n``, :func:`_kv_n`), each claim is judged on its intervals by
    :mod:`gna.report.verdict` (:func:`_kv_kept`, :func:`_knowledge_flat`, :func:`_state_grows`); the
    perplexity, one held-out set without an interval, is not resolved (:func:`_perplexity_flattens`).
    Each gain and spread is paired student against student where they kept their answers (``answers``:
    a template of ``variant``; the KV top-1 pooled over the probe seeds' prompts, knowledge over
    ``tasks["knowledge"]``). The best k and the largest spread are picks (among the ks above 0, among
    the pairs of ks): judged at Bonferroni's level for their number."""
    st = with_settings(settings)
    rows: list[dict] = []
    if heads is not None:
        ours = heads[heads.source == "ours"]
        ranked, random_ = ours[ours.selection == "ranked"].sort_values("k"), ours[ours.selection == "random"]
        teacher = ours[ours.selection == "teacher"]
        if not teacher.empty and near_chance(float(teacher.kv_retrieval.iloc[0]), 0.0, 100):
            return [not_applicable("Follow-up: hybrid distillation (KV retrieval, ranked vs random heads)", MODEL,
                                   f"the teacher is near chance on KV retrieval ({teacher.kv_retrieval.iloc[0]:.1f})")]
        if len(ranked) >= 2 and (ranked.k == 0).any():
            rows.append(_kv_kept(ranked, st, answers))
            kn = ranked.knowledge_avg.dropna()
            if len(kn) >= 2:
                rows.append(_knowledge_flat(ranked, kn, st, answers, tasks))
            if "heldout_ppl" in ranked and ranked.heldout_ppl.notna().sum() >= 3:
                rows.append(_perplexity_flattens(ranked, st))
        if not random_.empty:
            rows += ranked_vs_random(ranked, random_, MODEL, _kv_n(st, ranked), draws, st)
    if state is not None:
        ours = state[state.source == "ours"].sort_values("state_size")
        if len(ours) >= 2:
            rows.append(_state_grows(ours, st, answers))
    return rows


MODEL = "hybrid students"
"""What the follow-up's rows name as their model: the students together."""


def _kv_kept(ranked: pd.DataFrame, st: dict, answers: str | None) -> dict:
    """KV retrieval with the top heads kept: the gain from k = 0 to the best k beyond 30 points against
    the follow-up's 13.2 -> 99.0, scaled to the headroom (a pick among the ks above 0); on the points,
    beyond the probe spread (the best student's lowest probe set above k = 0's highest)."""
    r0 = ranked[ranked.k == 0].iloc[0]
    k0 = r0.kv_retrieval
    more = ranked[ranked.k > 0]
    best = more.loc[more.kv_retrieval.idxmax()]
    apart = best.get("kv_retrieval_min", best.kv_retrieval) > r0.get("kv_retrieval_max", k0)
    e, n = effect("hybrid_heads"), _kv_n(st, ranked)
    verdict, tested = judge(best.kv_retrieval - k0 >= 30 and best.kv_retrieval >= 80 and apart,
                            best.kv_retrieval - k0 >= 10 and apart), ""
    if n:
        verdict, tested = judged([part(f"KV's gain, k = 0 -> {int(best.k)}", best.kv_retrieval / 100, k0 / 100,
                                       n, 0.30, e.scaled(k0 / 100, 0.0),
                                       answers=_paired(answers, best, r0, "kv"), m=len(more))],
                                 f"{n} prompts (over probe seeds)")
    return dict(claim=f"Follow-up: a hybrid keeping a few top KV heads retrieves, one without attention "
                      f"does not (KV {e.before:.1f}% at k = 0 -> {e.after:.0f}% at k > 0)", model=MODEL,
                verdict=verdict,
                evidence=f"{_kv_named(ranked)} (mean [min, max] over probe seeds) k=0 {_kv(r0)}; "
                         + ", ".join(f"k={int(r.k)} {_kv(r)}" for _, r in more.iterrows())
                         + _mc(ranked, "k") + tested)


def _knowledge_flat(ranked: pd.DataFrame, kn: pd.Series, st: dict, answers: str | None,
                    tasks: dict | None) -> dict:
    """Knowledge as heads are kept (``kn``: each k's): its largest spread over k within the knowledge
    margin (a pick among the pairs of ks); on the points, within 5 points (partly within 10)."""
    span = kn.max() - kn.min()
    verdict, tested = judge(span <= 5, span <= 10), ""
    n_kn = n_of(st, "knowledge")
    if n_kn:
        top, bottom = ranked.loc[kn.idxmax()], ranked.loc[kn.idxmin()]
        verdict, tested = judged([part("knowledge's largest spread over k", kn.max() / 100, kn.min() / 100,
                                       n_kn, knowledge_line(kn.iloc[0] / 100, st),
                                       effect("hybrid_heads_knowledge").scaled(kn.iloc[0] / 100, 1 / 3),
                                       above=False, m=len(kn) * (len(kn) - 1) // 2,
                                       answers=_paired(answers, top, bottom, (tasks or {}).get("knowledge")))],
                                 f"{n_kn} questions")
    return dict(claim="Follow-up: knowledge tasks stay flat as heads are kept", model=MODEL, verdict=verdict,
                evidence="knowledge " + ", ".join(f"k={int(r.k)} {r.knowledge_avg:.1f}" for r in ranked.itertuples())
                         + tested)


def _perplexity_flattens(ranked: pd.DataFrame, st: dict) -> dict:
    """Held-out perplexity falls more with the first heads than with the rest; in a sampled study not
    resolved: one held-out set has no interval on its perplexity."""
    p = ranked.set_index("k").heldout_ppl
    first, rest = p.iloc[0] - p.iloc[1], p.iloc[1] - p.iloc[-1]
    verdict, note = judge(first > rest and first > 0, first > 0), ""
    if n_of(st, "knowledge"):   # a sampled study: every verdict on an interval, and a perplexity has none here
        verdict, note = "not resolved", ("; n = one held-out set, no interval on a perplexity (and no "
                                         "number published: the slides say it in words)")
    return dict(claim="Follow-up: perplexity improves sharply with the first heads, then flattens",
                model=MODEL, verdict=verdict,
                evidence="held-out perplexity " + ", ".join(f"k={k} {v:.2f}" for k, v in p.items()) + note)


def _state_grows(ours: pd.DataFrame, st: dict, answers: str | None) -> dict:
    """KV retrieval by SSM state (``ours``, by state size): its gain from the smallest state to the
    largest beyond 10 points against the follow-up's 72.6 -> 99.3, scaled; on the points, rising (within
    2 points a step) by 10 points at least."""
    kv = list(ours.kv_retrieval)
    mono = all(b >= a - 2 for a, b in zip(kv, kv[1:]))
    e, n = effect("hybrid_state_size"), _kv_n(st, ours)
    verdict, tested = judge(mono and kv[-1] - kv[0] >= 10, mono), ""
    if n:
        verdict, tested = judged([part(f"KV's gain, state {int(ours.state_size.iloc[0])} -> "
                                       f"{int(ours.state_size.iloc[-1])}", kv[-1] / 100, kv[0] / 100, n, 0.10,
                                       e.scaled(kv[0] / 100, 0.0),
                                       answers=_paired(answers, ours.iloc[-1], ours.iloc[0], "kv"))],
                                 f"{n} prompts (over probe seeds)")
    return dict(claim=f"Follow-up: KV retrieval grows with the SSM state ({e.before:.1f} -> {e.after:.1f} "
                      "from state 4 to 64)",
                model=MODEL, verdict=verdict,
                evidence=f"{_kv_named(ours)}: " + ", ".join(f"state {int(r.state_size)}: {_kv(r)}"
                                                             for _, r in ours.iterrows())
                         + _mc(ours, "state_size") + tested)


def ranked_vs_random(ranked: pd.DataFrame, random_: pd.DataFrame, model: str, n: int | None = None,
                     draws: dict | None = None, settings: dict | None = None) -> list[dict]:
    """Holds where, at every k with a random control, the ranked student's KV retrieval is above the
    highest of the random draws (beyond their spread) and by 5 points at one k at least; partly
    where it is above their mean on average; with a single draw the spread is unknown: partly at best.
    With each draw's score (``draws``: {"score": (k, selection) -> KV in 0-1, "seeds": the draws}), one
    part per k with the **draw** (a random student) as the unit: ranked minus each draw's KV, a t
    interval over the draws with ``d - 1`` degrees of freedom, judged against ``smallest_effect`` (no
    paper number); without them, no part can be judged ("not resolved": pooling the draws' prompts as
    one sample would treat a student's prompts as independent students)."""
    st = with_settings(settings)
    both = ranked.merge(random_, on="k", suffixes=("", "_random"))
    if both.empty:
        return []
    hi = both.get("kv_retrieval_max_random", both.kv_retrieval_random).fillna(both.kv_retrieval_random)
    n_draws = both.get("draws_random", pd.Series(1, index=both.index)).fillna(1)
    beyond = both.kv_retrieval - hi
    mean_diff = (both.kv_retrieval - both.kv_retrieval_random).mean()
    ok = bool((beyond > 0).all() and beyond.max() >= 5 and (n_draws >= 2).all())
    ev = ", ".join(f"k={int(r.k)} {r.kv_retrieval:.1f} vs {r.kv_retrieval_random:.1f}"
                   + (f" [{r.kv_retrieval_min_random:.1f}, {r.kv_retrieval_max_random:.1f}] over {int(r.draws_random)} "
                      "draws" if "draws_random" in both and pd.notna(r.draws_random) else "")
                   for r in both.itertuples())
    verdict, tested = judge(ok, mean_diff > 0), ""
    if n:
        parts, missing = [], []
        for r in both.itertuples():
            k = int(r.k)
            ranked_kv = draws["score"](k, "ranked") if draws else None
            scores = [draws["score"](k, f"random{seed}") for seed in draws["seeds"]] if draws else []
            if ranked_kv is None or len(scores) < 2 or any(x is None for x in scores):
                missing.append(k)
                continue
            mean, low, high, detectable = t_interval([ranked_kv - x for x in scores])
            parts.append(Part(f"ranked minus random KV, k = {k}", mean, low, high, 0.0, True, None, detectable,
                              soi=st["smallest_effect"], n=len(scores),
                              method=f"draw as the unit: t interval over {len(scores)} random students' differences, "
                                     f"{len(scores) - 1} df"))
        if parts:
            verdict, tested = judged(parts, f"{n} prompts per student (over probe seeds); each random student one draw")
            if missing:
                verdict = verdict if verdict != "holds" else "not resolved"
        else:
            verdict = "not resolved"
        if missing:
            tested += (f"; k = {', '.join(map(str, missing))}: each draw's score not at hand (or one draw): "
                       "not judged at the draw level")
    return [dict(claim="Follow-up: the ranked heads beat the same budget of random heads", model=model,
                 verdict=verdict,
                 evidence=f"{_kv_named(ranked)}, ranked vs random (mean [min, max]): {ev}" + tested)]
