"""Findings on top-k removal: the top-k KV heads removed against the same k random heads (the slides'
top-k table), its positive control on the KV probe, and ARC-C in its two formats under the same removal.

One concept at three layers: :mod:`gna.experiments.topk` sizes the removal and names its control,
:mod:`gna.report.heads` makes the top-k tables, this module judges them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from ..verdict import HOLDS, PARTLY, REFUTED, UNRESOLVED, claim_verdict, evidence
from .paper import at_share
from .sampled import n_of, part
from .verdicts import judge, read_table, with_settings

def topk(fig: Path, name: str, claim: str, retrieval: list[str], knowledge: list[str],
         settings: dict | None = None, paper: str | None = None) -> list[dict]:
    """Top-k removal at the largest k: retrieval-heavy tasks fall, knowledge holds (within
    ``knowledge_tolerance``). Tasks the unmodified model is near chance on are left out (all of them:
    n/a). Where the table holds the random-k control (``random_<role>``, min-max over draws), 'holds'
    also needs ranked removal to hurt retrieval more than every random draw of the same k, with two
    draws at least: the ranked mean over the retrieval tasks below the mean of the tasks' lowest
    random scores (which is at most any one draw's mean: a conservative test); without the control,
    a fall of 5 points and knowledge held.

    Where the questions' number is known (:func:`.sampled.n_of`) the claim's parts are judged by
    :mod:`gna.report.verdict` on their intervals (the tasks' items pooled, a random mean pooled over
    its draws; unpaired): retrieval's fall beyond 5 points against the paper's (``paper``, the
    paper effects' claim: ``arc_letter`` where the letter-format ARC-C is the retrieval task, else ``topk``; each task's at the paper's
    largest k whose share of heads is at most ours, scaled to the model), ranked removal's retrieval
    mean below the random draws' (no paper number: the slides have no random control; one draw
    cannot hold), and knowledge's fall within ``knowledge_tolerance`` against the paper's.

    A LAMBADA-like task is judged by its accuracy, as the other tasks, and its perplexity
    (``<task>_ppl``, the slides' score) is shown beside the verdict, not in it (:func:`_perplexities`):
    a table's perplexity has no count and no interval. Where the table has the positive control
    (``kv``: each removal's KV accuracy, ``topk_removal.kv_control``) it is judged too
    (:func:`_kv_control`); where removing the top heads is not shown to cost KV more than random heads,
    the evidence says "control failed" and a refutation is no longer one ("not resolved (control
    failed)"): the removal was not shown to act at all."""
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
        skipped = [task for task in measured if task not in retrieval_tasks]
        if not retrieval_tasks:
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence="the unmodified model is near chance on " + ", ".join(
                                 f"{task} ({smallest_k[task]:.1f})" for task in skipped)))
            continue

        def mean_fall(tasks: list[str]) -> float:
            return sum(smallest_k[task] - largest_k[task] for task in tasks) / len(tasks)

        retrieval_fall, knowledge_fall = mean_fall(retrieval_tasks), mean_fall(knowledge_tasks)
        kept = knowledge_fall <= 100 * thresholds["knowledge_tolerance"]
        falls = retrieval_fall >= 5
        evidence = f"k {int(smallest_k.k)} -> {int(largest_k.k)}: " + ", ".join(
            f"{task} {smallest_k[task]:.1f} -> {largest_k[task]:.1f}" for task in retrieval_tasks + knowledge_tasks)
        with_control = [task for task in retrieval_tasks
                        if f"random_{task}" in sub and pd.notna(largest_k.get(f"random_{task}"))]
        if with_control and len(with_control) == len(retrieval_tasks):
            draws = int(largest_k.random_draws) if pd.notna(largest_k.get("random_draws")) else 1
            ranked_mean = sum(largest_k[task] for task in retrieval_tasks) / len(retrieval_tasks)
            random_floor = sum(largest_k[f"random_{task}_min"] for task in retrieval_tasks) / len(retrieval_tasks)
            beyond = ranked_mean < random_floor
            on_mean = sum(largest_k[f"random_{task}"] - largest_k[task]
                          for task in retrieval_tasks) / len(retrieval_tasks) > 0
            ok = falls and kept and beyond and draws >= 2
            evidence += ("; random k = " + str(int(largest_k.k)) + f" (mean [min, max] over {draws} draws): "
                         + ", ".join(f"{task} {largest_k[f'random_{task}']:.1f} "
                                     f"[{largest_k[f'random_{task}_min']:.1f}, {largest_k[f'random_{task}_max']:.1f}]"
                                     for task in retrieval_tasks)
                         + f"; retrieval mean ranked {ranked_mean:.1f} vs random at least {random_floor:.1f}")
            failed = ([] if falls else ["retrieval falls less than 5 points"]) + (
                [] if kept else [f"knowledge falls {knowledge_fall:.1f} points"]) + (
                [] if beyond else [f"ranked removal's retrieval mean {ranked_mean:.1f} not below every random "
                                   f"draw's (the tasks' lowest random scores average {random_floor:.1f})"]) + (
                [] if draws >= 2 else ["one random draw: no spread"])
            verdict = judge(ok, falls and on_mean)
        else:
            failed = ([] if falls else ["retrieval falls less than 5 points"]) + (
                [] if kept else [f"knowledge falls {knowledge_fall:.1f} points"])
            verdict = judge(falls and kept, retrieval_fall > knowledge_fall)
        tested = _topk_parts(smallest_k, largest_k, retrieval_tasks, knowledge_tasks, with_control, thresholds,
                             paper or ("arc_letter" if "arc_challenge_chat" in retrieval else "topk"))
        if tested:
            verdict, shown = tested
            evidence += "; " + shown
        if skipped:
            evidence += "; left out, the unmodified model near chance: " + ", ".join(
                f"{task} ({smallest_k[task]:.1f})" for task in skipped)
        perplexity = [task for task in retrieval if pd.notna(smallest_k.get(f"{task}_ppl"))]
        if perplexity:
            evidence += "; " + _perplexities(smallest_k, largest_k, perplexity)
        control = _kv_control(largest_k, thresholds)
        if control is not None:
            works, shown = control
            evidence += "; " + shown
            if not works and verdict in (REFUTED, PARTLY):   # no removal shown to act: nothing refuted
                verdict = f"{UNRESOLVED} (control failed)"
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=evidence + (f" (failed: {'; '.join(failed)})" if failed else "")))
    return rows


def _perplexities(before, after, tasks: list[str]) -> str:
    """A LAMBADA-like task's perplexity rise (the slides' score for it), ranked beside random: shown,
    not judged (a table's perplexity has no interval; the same items' accuracy is judged)."""
    def shown(task: str) -> str:
        col, rnd = f"{task}_ppl", f"random_{task}_ppl"
        spread = (f" (random {after[rnd]:.2f} [{after[f'{rnd}_min']:.2f}, {after[f'{rnd}_max']:.2f}])"
                  if pd.notna(after.get(rnd)) else "")
        return f"{task} perplexity {before[col]:.2f} -> {after[col]:.2f}{spread}"
    return ", ".join(shown(t) for t in tasks) + " (perplexity: no interval, shown beside the verdict, not in it)"


def _kv_control(after, st: dict) -> tuple[bool, str] | None:
    """The positive control at the largest k (``kv``, the KV probe's accuracy; ``random_kv`` over the
    draws): removing the top KV heads must cost KV retrieval more than removing random heads, or the
    removal is not shown to act on what it was ranked for. Where the probe's prompts are known
    (``task_n["kv"]`` or ``kv_n``) a part judged by :mod:`gna.report.verdict` (random minus ranked KV,
    the draws pooled, unpaired; the slides have no control, so no paper number); else the ranked KV below
    every draw's. (works, evidence); None where the table has no control column."""
    if pd.isna(after.get("kv")) or pd.isna(after.get("random_kv")):
        return None
    draws = int(after.random_draws) if pd.notna(after.get("random_draws")) else 1
    k = int(after.k)
    prompts = (st.get("task_n") or {}).get("kv") or st.get("kv_n")   # a probe's prompts, not a task's questions
    if prompts:
        n = int(prompts)
        pooled = round(after.random_kv / 100 * n * draws) / (n * draws)
        control = part(f"KV control: random minus ranked KV at k {k} ({draws} draw{'s' * (draws > 1)} pooled)",
                       pooled, after.kv / 100, n * draws, 0.0, None, n_second=n)
        works, shown = control.verdict == HOLDS, f"n = {n} KV prompts; " + evidence([control])
    else:
        works = after.kv < after.random_kv_min
        shown = (f"KV control at k {k}: ranked {after.kv:.1f} vs random {after.random_kv:.1f} "
                 f"[{after.random_kv_min:.1f}, {after.random_kv_max:.1f}] over {draws} draws")
    return works, shown + ("" if works else " (control failed: the top heads' removal is not shown to cost "
                                            "KV retrieval more than random heads)")


def _pooled(row, tasks: list[str], sizes: list[int], column: str = "{}") -> float:
    """``tasks``' percent scores in ``row`` (``column`` names each task's) pooled over their items
    (``sizes``: each task's), in 0-1: the share right of all the tasks' items, a count over their sum
    (the mean of the scores where the tasks are of one size)."""
    return sum(row[column.format(task)] * k for task, k in zip(tasks, sizes)) / sum(sizes) / 100


def _topk_parts(before, after, retrieval: list[str], knowledge: list[str], with_control: list[str],
                st: dict, claim: str) -> tuple[str, str] | None:
    """(verdict, evidence) of top-k removal's parts on their intervals; None without the questions' number."""
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
    parts = [part(f"retrieval's fall (items pooled), k {int(before.k)} -> {int(after.k)}", _pooled(before, retrieval, sizes),
                  _pooled(after, retrieval, sizes), n, 0.05, paper)]
    draws = int(after.random_draws) if pd.notna(after.get("random_draws")) else 1
    if with_control and len(with_control) == len(retrieval):
        pooled = round(_pooled(after, retrieval, sizes, "random_{}") * n * draws) / (n * draws)
        parts.append(part(f"random minus ranked retrieval (items pooled) at k {int(after.k)} ({draws} draw{'s' * (draws > 1)} pooled)", pooled,
                          _pooled(after, retrieval, sizes), n * draws, 0.0, None, n_second=n))
    e_kn = [at_share(claim, task, share) for task in knowledge]
    kn_chance = st.get("knowledge_chance")
    kn_paper = [e.scaled(before[task] / 100, kn_chance if kn_chance is not None else e.chance / 100)
                for task, e in zip(knowledge, e_kn) if e is not None and e.published]
    parts.append(part("knowledge's fall", _pooled(before, knowledge, kn_sizes), _pooled(after, knowledge, kn_sizes), n_kn,
                      st["knowledge_tolerance"], sum(kn_paper) / len(kn_paper) if kn_paper else None, above=False))
    verdict = claim_verdict(parts)
    note = ""
    if draws < 2 and len(parts) == 3 and verdict == "holds":
        verdict, note = "not resolved", " (one random draw: its spread unknown, so no 'holds')"
    shown = (f"n = {', '.join(f'{t} {k}' for t, k in zip(retrieval + knowledge, sizes + kn_sizes))} questions; "
             f"paper at {share:.1%} of the heads: {claim} rows of the paper effects' table; " + evidence(parts) + note)
    return verdict, shown
