"""Findings on top-k removal: the top-k KV heads removed against the same k random heads (the slides'
top-k table), its positive control on the KV probe, and ARC-C in its two formats under the same removal.

One concept at three layers: :mod:`gna.experiments.topk` sizes the removal and names its control,
:mod:`gna.report.topk` makes the top-k tables, this module judges them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import TABLE_DIGITS, chance_of, near_chance
from ...evaluation.paired import Paired, PairingError, pair, total
from ...evaluation.power import paired_detectable
from ..verdict import HOLDS, PARTLY, REFUTED, UNRESOLVED, Part, claim_verdict, evidence, t_interval
from .paper import at_share
from .sampled import n_of, part, read_answers
from .verdicts import (capped, judge, knowledge_chance, knowledge_line, knowledge_untestable, not_applicable,
                       read_table, with_settings)

def topk(fig: Path, name: str, claim: str, retrieval: list[str], knowledge: list[str],
         settings: dict | None = None, paper: str | None = None, answers: str | None = None,
         tasks: dict | None = None, draws: list[int] | None = None) -> list[dict]:
    """Top-k removal at the largest k: retrieval-heavy tasks fall, knowledge holds. Tasks the
    unmodified model is near chance on are left out (all of them: n/a). One verdict path: where the
    questions' number is known (:func:`.sampled.n_of`), the claim's parts judged by
    :mod:`gna.report.verdict` (:func:`_topk_parts`); else (a table alone) the same three checks on the
    point estimates (:func:`_topk_points`): retrieval falls by more than ``tolerance``, knowledge within
    its margin (:func:`.verdicts.knowledge_line`) and, where the table holds the random-k control, the
    ranked retrieval mean below the mean of the tasks' lowest random scores. ``paper``: the paper
    effects' claim (``arc_letter`` where the letter-format ARC-C is the retrieval task, else ``topk``).
    Paired item by item where the removals kept their answers (``answers``, a template of ``model``,
    ``k`` and ``draw``: "" or "-random<seed>"; ``tasks``, {column: its tasks}; ``draws``, the random
    seeds), else unpaired, saying so.

    A LAMBADA-like task is judged by its accuracy, as the other tasks, and its perplexity
    (``<task>_ppl``, the slides' score) is shown beside the verdict, not in it (:func:`_perplexities`).
    Where the table has the positive control (``kv``: each removal's KV accuracy,
    ``topk_removal.kv_control``) it is judged too (:func:`_kv_control`); where removing the top heads is
    not shown to cost KV more than random heads, a refutation is no longer one ("not resolved (control
    failed)"): the removal was not shown to act at all. At most "partly" where the unmodified model's
    knowledge is near ``knowledge_chance`` (knowledge kept cannot fail)."""
    thresholds = with_settings(settings)
    table = read_table(fig, name)
    if table is None:
        return []
    rows = []
    for model, sub in table.groupby("model", sort=False):
        sub = sub.sort_values("k")
        smallest_k, largest_k = sub.iloc[0], sub.iloc[-1]  # rows of the table: task scores by column
        measured = [task for task in retrieval if task in sub and pd.notna(smallest_k[task])]
        retrieval_tasks = [task for task in measured
                           if not near_chance(smallest_k[task], chance_of(task, thresholds["mmlu_chance"]), 100)]
        knowledge_tasks = [task for task in knowledge if task in sub]
        if not measured or not knowledge_tasks:
            continue
        skipped = ", ".join(f"{task} ({smallest_k[task]:.1f})" for task in measured if task not in retrieval_tasks)
        if not retrieval_tasks:
            rows.append(not_applicable(claim, model, "the unmodified model is near chance on " + skipped))
            continue
        found = dict(answers=answers, model=model, tasks=tasks or {}, draws=draws or [], table=sub)
        verdict, evidence_ = _topk_verdict(smallest_k, largest_k, retrieval_tasks, knowledge_tasks, sub, thresholds,
                                           paper or ("arc_letter" if "arc_challenge_chat" in retrieval else "topk"),
                                           found)
        if skipped:
            evidence_ += "; left out, the unmodified model near chance: " + skipped
        perplexity = [task for task in retrieval if pd.notna(smallest_k.get(f"{task}_ppl"))]
        if perplexity:
            evidence_ += "; " + _perplexities(smallest_k, largest_k, perplexity)
        kv = _kv_control(largest_k, thresholds, found)
        if kv is not None:
            works, shown = kv
            evidence_ += "; " + shown
            if not works and verdict in (REFUTED, PARTLY):   # no removal shown to act: nothing refuted
                verdict = f"{UNRESOLVED} (control failed)"
        rows.append(dict(claim=claim, model=model, verdict=verdict, evidence=evidence_))
    return rows


def _topk_verdict(before, after, retrieval: list[str], knowledge: list[str], sub: pd.DataFrame, st: dict,
                  paper: str, found: dict) -> tuple[str, str]:
    """(verdict, evidence) of top-k removal from k = ``before`` to ``after`` (the table's rows) on the
    tasks judged: the scores, the random-k control where the table has it for every retrieval task, the
    verdict on the parts (:func:`_topk_parts`) or else on the point estimates (:func:`_topk_points`),
    at most "partly" where the unmodified model's knowledge is near ``knowledge_chance``."""
    shown = f"k {int(before.k)} -> {int(after.k)}: " + ", ".join(
        f"{task} {before[task]:.1f} -> {after[task]:.1f}" for task in retrieval + knowledge)
    with_control = [task for task in retrieval if f"random_{task}" in sub and pd.notna(after.get(f"random_{task}"))]
    control = bool(with_control) and len(with_control) == len(retrieval)
    n_draws = int(after.random_draws) if pd.notna(after.get("random_draws")) else 1
    if control:
        ranked_mean = sum(after[task] for task in retrieval) / len(retrieval)
        random_floor = sum(after[f"random_{task}_min"] for task in retrieval) / len(retrieval)
        shown += ("; random k = " + str(int(after.k)) + f" (mean [min, max] over {n_draws} draws): "
                  + ", ".join(f"{task} {after[f'random_{task}']:.1f} "
                              f"[{after[f'random_{task}_min']:.1f}, {after[f'random_{task}_max']:.1f}]"
                              for task in retrieval)
                  + f"; retrieval mean ranked {ranked_mean:.1f} vs the random draws' lowest {random_floor:.1f}")
    tested = _topk_parts(before, after, retrieval, knowledge, control, st, paper, found)
    if tested is not None:
        verdict, parts = tested
        shown += "; " + parts
    else:   # a table alone: the same checks on the point estimates, the thresholds from the config
        verdict, failed = _topk_points(before, after, retrieval, knowledge, control, n_draws, st)
        shown += f" (failed: {'; '.join(failed)})" if failed else ""
    untestable = knowledge_untestable(_pooled(before, knowledge, [1] * len(knowledge)), st)
    return capped(verdict, untestable), shown + (f" ({untestable})" if untestable else "")


def _topk_points(before, after, retrieval: list[str], knowledge: list[str], control: bool, n_draws: int,
                 st: dict) -> tuple[str, list[str]]:
    """(verdict, what failed) on the point estimates, for a table without the questions' number: the
    retrieval fall beyond ``tolerance``, knowledge's within its margin, ranked below every random draw
    (two draws at least) where the table has the control; ``partly`` where retrieval falls and, with a
    control, the ranked mean is below the random one."""
    def mean_fall(tasks: list[str]) -> float:
        return sum(before[task] - after[task] for task in tasks) / len(tasks)

    fall, kn_fall = mean_fall(retrieval), mean_fall(knowledge)
    kn_line = knowledge_line(_pooled(before, knowledge, [1] * len(knowledge)), st, 1.0)
    falls, kept = fall > 100 * st["tolerance"], kn_fall <= 100 * kn_line
    failed = ([] if falls else [f"retrieval falls {fall:.1f} points, not beyond {100 * st['tolerance']:.0f}"]) + (
        [] if kept else [f"knowledge falls {kn_fall:.1f} points, beyond {100 * kn_line:.1f}"])
    beyond = on_mean = True
    if control:
        ranked = sum(after[t] for t in retrieval) / len(retrieval)
        floor = sum(after[f"random_{t}_min"] for t in retrieval) / len(retrieval)
        beyond = ranked < floor and n_draws >= 2
        on_mean = sum(after[f"random_{t}"] for t in retrieval) / len(retrieval) > ranked
        failed += [] if ranked < floor else [f"ranked removal's retrieval mean {ranked:.1f} not below every random "
                                              f"draw's (the tasks' lowest random scores average {floor:.1f})"]
        failed += [] if n_draws >= 2 else ["one random draw: no spread"]
    return judge(falls and kept and beyond, falls and on_mean), failed


def _perplexities(before, after, tasks: list[str]) -> str:
    """A LAMBADA-like task's perplexity rise (the slides' score for it), ranked beside random: shown,
    not judged (a table's perplexity has no interval; the same items' accuracy is judged)."""
    def ppl(v: float) -> str:   # the table's own digits (TABLE_DIGITS significant): 152.3, not 152.30
        return f"{v:.0f}" if abs(v) >= 10 ** (TABLE_DIGITS - 1) else f"{v:#.{TABLE_DIGITS}g}"

    def shown(task: str) -> str:
        col, rnd = f"{task}_ppl", f"random_{task}_ppl"
        spread = (f" (random {ppl(after[rnd])} [{ppl(after[f'{rnd}_min'])}, {ppl(after[f'{rnd}_max'])}])"
                  if pd.notna(after.get(rnd)) else "")
        return f"{task} perplexity {ppl(before[col])} -> {ppl(after[col])}{spread}"
    return ", ".join(shown(t) for t in tasks) + " (perplexity: no interval, shown beside the verdict, not in it)"


def _kv_control(after, st: dict, found: dict) -> tuple[bool, str] | None:
    """The positive control at the largest k (``kv``, the KV probe's accuracy; ``random_kv`` over the
    draws): removing the top KV heads must cost KV retrieval more than removing random heads, or the
    removal is not shown to act on what it was ranked for. With each draw's KV score at hand (its
    result table), a part judged by :mod:`gna.report.verdict` at the draw level (:func:`_draw_part`,
    against ``smallest_effect``: the slides have no control, so no paper number); else the ranked KV
    below every draw's, on the table's points. (works, evidence); None where the table has no control
    column."""
    if pd.isna(after.get("kv")) or pd.isna(after.get("random_kv")):
        return None
    n_draws = int(after.random_draws) if pd.notna(after.get("random_draws")) else 1
    k = int(after.k)
    def kv_of(draw: str) -> float | None:
        answers = read_answers(found["answers"], model=found["model"], k=k, draw=draw)
        return _kv_of(answers) if answers is not None else None

    scores = _draw_scores(found, kv_of)
    if scores is not None and len(scores) >= 2:
        control = _draw_part(f"KV control: random minus ranked KV at k {k}", [s - after.kv / 100 for s in scores], st)
        works, shown = control.verdict == HOLDS, evidence([control])
    else:
        works = after.kv < after.random_kv_min and n_draws >= 2
        shown = (f"KV control at k {k}: ranked {after.kv:.1f} vs random {after.random_kv:.1f} "
                 f"[{after.random_kv_min:.1f}, {after.random_kv_max:.1f}] over {n_draws} draws (each draw's score "
                 "not at hand: not judged at the draw level)")
    return works, shown + ("" if works else " (control failed: the top heads' removal is not shown to cost "
                                            "KV retrieval more than random heads)")


def _kv_of(answers: pd.DataFrame) -> float | None:
    """A removal's KV accuracy (0-1) from its answers (the probe's rows: a task named kv...), or None."""
    rows = answers[answers.task.astype(str).str.startswith("kv") & (answers.metric == "acc")]
    return float(rows.value.astype(float).mean()) if not rows.empty else None


def _pooled(row, tasks: list[str], sizes: list[int], column: str = "{}") -> float:
    """``tasks``' percent scores in ``row`` (``column`` names each task's) pooled over their items
    (``sizes``: each task's), in 0-1: the share right of all the tasks' items, a count over their sum
    (the mean of the scores where the tasks are of one size)."""
    return sum(row[column.format(task)] * k for task, k in zip(tasks, sizes)) / sum(sizes) / 100


def _column_pairs(first: pd.DataFrame, second: pd.DataFrame, tasks: list[str], report_filter: str | None) -> list[Paired]:
    """Two removals' answers on one table column's ``tasks``, question by question
    (:func:`gna.evaluation.paired.pair`): each task's metric the first of the tables' scores it has
    (``GEN_METRICS``), under the table's filter where the task has it (``report_filter``)."""
    from ..heads import one_filter   # the tables' modules, with matplotlib: only where answers are paired
    from ..hybrid_distillation import GEN_METRICS

    out = []
    for task in tasks:
        rows = first[first.task == task]
        metric = next((m for m in GEN_METRICS if (rows.metric == m).any()), None)
        if metric is None:
            raise PairingError(f"{task}: no per-question accuracy in the answers")
        out.append(pair(first, second, task, metric, one_filter(rows, metric, report_filter)[1]))
    return out


def _removals_paired(found: dict, first: tuple[int, str], second: tuple[int, str], columns: list[str],
                     row) -> Paired | None:
    """Two removals (each ``(k, draw)``: draw "" or "-random<seed>") over ``columns``' questions pooled,
    item by item; None where either kept no answers, the study's columns' tasks are not known, or their
    questions differ (unpaired). ``row``: the table's row, whose ``<column>_filter`` names the filter."""
    template, tasks = found.get("answers"), found.get("tasks") or {}
    if template is None or not all(c in tasks for c in columns):
        return None
    a, b = (read_answers(template, model=found["model"], k=k, draw=draw) for k, draw in (first, second))
    if a is None or b is None:
        return None
    try:
        return total([c for col in columns for c in _column_pairs(a, b, list(tasks[col]), row.get(f"{col}_filter"))])
    except PairingError:
        return None


def _draw_scores(found: dict, score) -> list[float] | None:
    """``score(draw)`` of each random draw (draw "-random<seed>"), in the draws' order; None where
    some draw's is not at hand."""
    if not found.get("draws") or found.get("answers") is None:
        return None
    out = [score(f"-random{seed}") for seed in found["draws"]]
    return None if any(v is None for v in out) else out


def _draw_part(name: str, differences: list[float], st: dict) -> Part:
    """Random minus ranked with the draw as the unit: Student's t interval over the draws' paired
    differences (each draw's accuracy minus the ranked removal's, on the same questions), ``d - 1``
    degrees of freedom, judged against the smallest effect of interest (no paper number)."""
    mean, low, high, detectable = t_interval(differences)
    d = len(differences)
    return Part(name, mean, low, high, 0.0, True, None, detectable, soi=st["smallest_effect"], n=d, paired=None,
                method=f"draw as the unit: t interval over {d} draws' paired differences, {d - 1} df")


def _topk_parts(before, after, retrieval: list[str], knowledge: list[str], control: bool,
                st: dict, claim: str, found: dict) -> tuple[str, str] | None:
    """(verdict, evidence) of top-k removal's parts on their intervals; None without the questions' number.
    The parts: retrieval's fall from k = 0 beyond ``tolerance`` against the paper's (``claim``'s rows of the
    paper effects' table: each task's at the paper's largest k whose share of heads is at most ours, scaled
    to the model); random minus ranked retrieval with the random **draw** as the unit (:func:`_draw_part`:
    a t interval over the draws' paired differences, no paper number: judged against ``smallest_effect``;
    one draw cannot hold); knowledge's fall within the knowledge margin against the paper's."""
    sizes = [n_of(st, task) for task in retrieval]
    kn_sizes = [n_of(st, task) for task in knowledge]
    if not all(sizes) or not all(kn_sizes):
        return None
    n, n_kn = sum(sizes), sum(kn_sizes)
    share = float(after.heads_pct) / 100 if pd.notna(after.get("heads_pct")) else 0.0
    papers = []
    for task in retrieval:
        e = at_share(claim, task, share)
        if e is not None and e.published:
            papers.append(e.scaled(before[task] / 100, chance_of(task, st["mmlu_chance"])))
    paper = sum(papers) / len(papers) if papers else None
    k0, k1 = int(before.k), int(after.k)
    parts = [_fall_part(f"retrieval's fall, k {k0} -> {k1}", found, before, after, retrieval, sizes,
                        st["tolerance"], paper)]
    notes = []
    n_draws = int(after.random_draws) if pd.notna(after.get("random_draws")) else 1
    if control:
        def random_minus_ranked(draw: str) -> float | None:   # on the same questions
            counts = _removals_paired(found, (k1, ""), (k1, draw), retrieval, after)
            return counts.second_accuracy - counts.first_accuracy if counts is not None else None

        scores = _draw_scores(found, random_minus_ranked)
        if scores is not None and len(scores) >= 2:
            parts.append(_draw_part(f"random minus ranked retrieval at k {k1}", scores, st))
        elif scores is not None or n_draws < 2:
            notes.append("one random draw: its spread unknown, so no 'holds'")
        else:
            notes.append("each random draw's answers not at hand: random minus ranked not judged at the draw level, "
                         "so no 'holds'")
    e_kn = [at_share(claim, task, share) for task in knowledge]
    kn_paper = [e.scaled(before[task] / 100, knowledge_chance(st, e))
                for task, e in zip(knowledge, e_kn) if e is not None and e.published]
    kn_before = _pooled(before, knowledge, kn_sizes)
    parts.append(_fall_part("knowledge's fall", found, before, after, knowledge, kn_sizes,
                            knowledge_line(kn_before, st), sum(kn_paper) / len(kn_paper) if kn_paper else None,
                            above=False))
    verdict = claim_verdict(parts)
    if notes and verdict == HOLDS:
        verdict = UNRESOLVED
    shown = (f"n = {', '.join(f'{t} {k}' for t, k in zip(retrieval + knowledge, sizes + kn_sizes))} questions; "
             f"paper at {share:.1%} of the heads: {claim} rows of the paper effects' table; knowledge margin "
             f"{st['knowledge_margin']:.0%} of the unmodified model's above-chance knowledge; " + evidence(parts)
             + "".join(f" ({x})" for x in notes))
    return verdict, shown


def _fall_part(name: str, found: dict, before, after, columns: list[str], sizes: list[int], line: float,
               paper: float | None, above: bool = True) -> Part:
    """k = 0 minus the ranked removal over ``columns``' questions pooled: paired on their answers where
    both removals kept them (the interval then the one a hand count of the answers gives), else the
    table's accuracies, unpaired."""
    counts = _removals_paired(found, (int(before.k), ""), (int(after.k), ""), columns, after)
    first, second = _pooled(before, columns, sizes), _pooled(after, columns, sizes)
    if counts is not None and counts.n == sum(sizes) and abs(counts.difference - (first - second)) < 1e-3:
        low, high = counts.interval()
        detectable = paired_detectable(counts.n, discordance=max((counts.first_only + counts.second_only) / counts.n,
                                                                 1 / counts.n))
        return Part(name, counts.difference, low, high, line, above, paper, detectable, n=counts.n, paired=True,
                    method=f"{counts.first_only} answers lost, {counts.second_only} gained; McNemar p "
                           f"{counts.p_value:.2g}")
    return part(name, first, second, sum(sizes), line, paper, above=above)
