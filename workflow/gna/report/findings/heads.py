"""Findings on single heads: Table 1 (keeping the two G&A heads), Fig. 4 (KV pairs), top-k removal
against its random control, and SSM vs transformer redundancy at an equal share of heads.

One concept at two layers: :mod:`gna.report.heads` makes these tables, this module judges them.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from .pruning import minimal_scores
from ...evaluation.power import detectable_from_interval
from ..verdict import HOLDS, PARTLY, REFUTED, UNRESOLVED, Part, claim_verdict, evidence
from .paper import at_share, effect
from .sampled import acc, drop, drop_interval, n_of, part, read_answers, resolved
from .verdicts import judge, knowledge_untestable, read_table, with_settings

REDUNDANCY_SHARE = 0.10
"""SSM vs transformer redundancy is compared on the top heads covering this share of each model's heads."""


def head_keeping(fig: Path, settings: dict | None = None, answers: str | None = None,
                 tasks: dict | None = None) -> list[dict]:
    """Table 1, all four conditions: both heads kept, MMLU within ``tolerance`` of the minimal model's
    (not below it by more); gather only, aggregate only, neither: MMLU near chance; knowledge within
    ``knowledge_tolerance`` of the minimal model's in all four. With one critical layer (its heads under
    ``gather``, none under ``aggregate``) only 'both' and 'neither' are run, and the checks are those
    two's. Where the questions' number is known (:func:`.sampled.n_of`: ``task_n`` or ``mmlu_n``) the
    checks are parts judged by :mod:`gna.report.verdict` on their intervals against the paper's Table 1
    (the effects' table, :func:`_keeping_parts`), paired where the jobs kept their answers: ``answers``, a
    template of ``model``, ``source`` and ``condition``; ``tasks``, the MMLU column's (``{"mmlu": [...]}``).
    Without it, thresholds on the point estimates: 'holds' needs every check; 'partly' where keeping both
    heads is still 10 points above every other condition. At most 'partly' where the minimal model's
    knowledge is near ``knowledge_chance`` (knowledge flat cannot fail)."""
    thresholds = with_settings(settings)
    chance = chance_of("mmlu", thresholds["mmlu_chance"])
    table = read_table(fig, "head_keeping.csv")
    if table is None:
        return []
    rows = []
    claim = "Table 1: the two G&A heads alone keep MMLU; without either, chance; knowledge flat"
    for (model, source), sub in table.groupby(["model", "source"], sort=False):
        by_condition = sub.set_index("condition")
        if "mmlu" not in by_condition or by_condition["mmlu"].isna().all():
            rows.append(dict(claim=claim, model=f"{model} ({source} heads)", verdict="n/a",
                             evidence=str(by_condition["note"].dropna().iloc[0])
                             if "note" in by_condition and by_condition["note"].notna().any() else "not run"))
            continue
        first = by_condition.iloc[0]
        one_layer = not isinstance(first.get("aggregate"), str) or not first.get("aggregate")
        label = (f"{model} ({source} heads {first['gather']}, one critical layer)" if one_layer
                 else f"{model} ({source} heads {first['gather']} + {first['aggregate']})")
        run = [c for c in ("both", "gather_only", "aggregate_only", "neither") if pd.notna(by_condition["mmlu"].get(c))]
        ref = minimal_scores(fig, model, thresholds["tolerance"])
        if ref is not None and near_chance(ref[0], chance, 100):
            rows.append(dict(claim=claim, model=label, verdict="n/a",
                             evidence=f"the minimal model is near chance on MMLU ({ref[0]:.1f})"))
            continue
        mmlu, knowledge = by_condition["mmlu"], by_condition["knowledge"]
        failed = []
        if ref is None:
            failed.append("the minimal model's scores are not in this run")
        elif mmlu["both"] < ref[0] - 100 * thresholds["tolerance"]:
            failed.append(f"both kept: MMLU {mmlu['both']:.1f} below the minimal model's {ref[0]:.1f} by more "
                          "than "
                          f"{100 * thresholds['tolerance']:.0f}")
        for cond in (c for c in ("gather_only", "aggregate_only", "neither") if c in run):
            if not near_chance(mmlu[cond], chance, 100):
                failed.append(f"{cond.replace('_', ' ')}: MMLU {mmlu[cond]:.1f} not near chance")
        if ref is not None:
            off = [cond for cond in run if abs(knowledge[cond] - ref[1]) > 100 * thresholds["knowledge_tolerance"]]
            if off:
                failed.append("knowledge off the minimal model's in "
                              + ", ".join(cond.replace("_", " ") for cond in off))
        best = max((c for c in ("gather_only", "aggregate_only", "neither") if c in run), key=lambda c: mmlu[c])
        others = mmlu[best]
        verdict = judge(not failed, mmlu["both"] - others >= 10)
        n, n_kn = n_of(thresholds, "mmlu"), n_of(thresholds, "knowledge")
        sampled, parts = "", []
        if n:   # both kept against the best of the others, beyond noise
            keys = dict(model=model, source=source)
            pairs = {cond: read_answers(answers, **keys, condition=cond) for cond in run}
            gap = drop(mmlu["both"] / 100, others / 100, n, (pairs["both"], pairs[best], (tasks or {}).get("mmlu", ())))
            sampled = (f"; n = {n} questions: MMLU both {acc(mmlu['both'] / 100, n)}, the best other "
                       f"{acc(others / 100, n)}, {gap.text}")
            if ref is not None and n_kn:
                parts = _keeping_parts(ref, mmlu, knowledge, run, n, n_kn, thresholds, chance, pairs,
                                       (tasks or {}).get("mmlu", ()))
                verdict = claim_verdict(parts)
            else:
                verdict = resolved(verdict, gap.beyond)
        untestable = knowledge_untestable(ref[1], thresholds, 100) if ref is not None else ""
        verdict = "partly" if untestable and verdict == "holds" else verdict
        rows.append(dict(claim=claim, model=label, verdict=verdict,
                         evidence=(f"minimal model MMLU {ref[0]:.1f}, knowledge {ref[1]:.1f}; " if ref else "")
                                  + "MMLU " + ", ".join(f"{cond.replace('_', ' ')} "
                                                        + (f"{mmlu[cond]:.1f}" if cond in run else "n/a")
                                                        for cond in ("both", "gather_only", "aggregate_only", "neither"))
                                  + "; knowledge "
                                  + " / ".join(f"{knowledge[cond]:.1f}" if cond in run else "n/a"
                                               for cond in ("both", "gather_only", "aggregate_only", "neither"))
                                  + f" (paper: MMLU {_paper_table1()})" + sampled
                                  + (f" (failed: {'; '.join(failed)})" if failed else "")
                                  + (f" ({untestable})" if untestable else "")
                                  + (f"; {evidence(parts)}" if parts else "")))
    return rows


KEEPING = ("both", "gather_only", "aggregate_only", "neither")


def _paper_table1() -> str:
    """The paper's Table 1 MMLU, both / gather only / aggregate only / neither, from the effects' table."""
    return " / ".join(f"{effect(f'table1_{cond}').after:.1f}" for cond in KEEPING)


def _keeping_parts(ref: tuple[float, float], mmlu, knowledge, run: list[str], n: int, n_kn: int, st: dict,
                   chance: float, pairs: dict, mmlu_tasks) -> list[Part]:
    """Table 1's parts (accuracies in percent in, 0-1 in the parts): both kept, MMLU's drop from the minimal
    model (``ref``: its MMLU, knowledge) within ``tolerance`` against the paper's none (unpaired: the
    minimal model's answers are another job's); each other condition, MMLU's fall from both kept beyond
    ``collapse`` of both's above-chance MMLU against the paper's (paired on ``pairs``, each condition's
    answers, where kept); knowledge's largest drop from the minimal model over the conditions within
    ``knowledge_tolerance`` against the paper's."""
    both = mmlu["both"] / 100
    parts = [part("both kept: MMLU drop from the minimal model", ref[0] / 100, both, n, st["tolerance"],
                  effect("table1_both").scaled(ref[0] / 100, chance), above=False)]
    parts += [part(f"MMLU fall, both kept -> {cond.replace('_', ' ')}", both, mmlu[cond] / 100, n,
                   st["collapse"] * (both - chance), effect(f"table1_{cond}").scaled(both, chance),
                   answers=(pairs.get("both"), pairs.get(cond), mmlu_tasks))
              for cond in run if cond != "both"]
    worst = max(run, key=lambda cond: ref[1] - knowledge[cond])
    kn = effect("table1_knowledge")
    kn_chance = st.get("knowledge_chance")
    parts.append(part(f"knowledge drop from the minimal model, {worst.replace('_', ' ')} (the largest)", ref[1] / 100,
                      knowledge[worst] / 100, n_kn, st["knowledge_tolerance"],
                      kn.scaled(ref[1] / 100, kn.chance / 100 if kn_chance is None else kn_chance), above=False))
    return parts


def kv_pairs(fig: Path, settings: dict | None = None) -> list[dict]:
    """Fig. 4: the drop without the Aggregate head grows with the pairs: by 0.05 at least from the
    fewest to the most pairs. Where the prompts per probe set are known (``task_n["kv"]`` or
    ``kv_n``), judged by :mod:`gna.report.verdict` on the growth's interval (each drop's
    Newcombe-Wilson interval over the prompts pooled over probe seeds, the two combined by
    square-and-add; the paper publishes curves only, so the line alone refutes); else beyond the
    probe seeds' spread (the lowest drop at the most pairs above the highest at the fewest). n/a where
    the full model is near chance (1 / pairs) at the fewest pairs, or no head is classified Aggregate."""
    st = with_settings(settings)
    t = read_table(fig, "kv_pairs.csv")
    if t is None:
        return []
    rows = []
    claim = "Fig. 4: without the Aggregate head, KV accuracy falls more as pairs grow"
    for model, sub in t.groupby("model", sort=False):
        full = sub[sub.condition == "full"].set_index("n_pairs").sort_index()
        n0, n1 = full.index[0], full.index[-1]
        if near_chance(full.accuracy.iloc[0], 1 / n0):
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the full model is near chance on KV retrieval ({full.accuracy.iloc[0]:.2f} "
                                      f"at {int(n0)} pairs)"))
            continue
        drops, accs = {}, {}
        for cond in ("no_gather", "no_aggregate"):
            c = sub[sub.condition == cond]
            if c.empty or c.accuracy.isna().all():
                continue
            c = c.set_index("n_pairs").sort_index()
            accs[cond] = c.accuracy
            if "drop" not in c:
                c = c.assign(drop=full.accuracy - c.accuracy)
            lo = c.get("drop_min", c["drop"]).fillna(c["drop"])
            hi = c.get("drop_max", c["drop"]).fillna(c["drop"])
            drops[cond] = [(c["drop"][n], lo[n], hi[n]) for n in (n0, n1)]
        if "no_aggregate" not in drops:
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence="no head classified Aggregate among the top heads"))
            continue
        (a0, _, a0_hi), (a1, a1_lo, _) = drops["no_aggregate"]
        growth, apart = a1 - a0, a1_lo > a0_hi
        g = drops.get("no_gather")
        seeds = int(sub.probe_seeds.max()) if "probe_seeds" in sub else 1
        prompts = (st.get("task_n") or {}).get("kv") or st.get("kv_n")
        verdict = judge(growth >= 0.05 and apart, growth > 0)
        tested = ""
        if prompts:
            n = int(prompts) * seeds
            ends = [drop_interval(full.accuracy[x], accs["no_aggregate"][x], n) for x in (n0, n1)]
            (d0, l0, u0), (d1, l1, u1) = ends
            low, high = (d1 - d0) - math.hypot(d1 - l1, u0 - d0), (d1 - d0) + math.hypot(u1 - d1, d0 - l0)
            growth_part = Part(f"growth of the drop without Aggregate, {int(n0)} -> {int(n1)} pairs", d1 - d0, low,
                               high, 0.05, paper=effect("fig4_growth").scaled(full.accuracy[n0], 1 / n0),
                               detectable=detectable_from_interval(low, high))
            verdict = claim_verdict([growth_part])
            tested = (f"; n = {int(prompts)} prompts x {seeds} probe seeds per point; {evidence([growth_part])} "
                      f"(Fig. 4: {effect('fig4_growth').source.split(': ')[-1]})")

        def fmt(d):
            return f"{d[0]:.2f}" + (f" [{d[1]:.2f}, {d[2]:.2f}]" if d[1] != d[2] else "")
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"drop without Aggregate {fmt(drops['no_aggregate'][0])} at {int(n0)} pairs -> "
                                  f"{fmt(drops['no_aggregate'][1])} at {int(n1)}"
                                  + (f"; without Gather {fmt(g[0])} -> {fmt(g[1])}" if g else "")
                                  + f" (mean [min, max] over {seeds} probe seeds)"
                                  + ("" if apart or growth < 0.05 else "; the growth is within the probe spread")
                                  + tested))
    return rows


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
    :mod:`gna.report.verdict` on their intervals (the tasks pooled, a random mean pooled over its
    draws; unpaired): the retrieval mean's fall beyond 5 points against the paper's (``paper``, the
    paper effects' claim: ``arc_letter`` where the letter-format ARC-C is the retrieval task, else ``topk``; each task's at the paper's
    largest k whose share of heads is at most ours, scaled to the model), ranked removal's retrieval
    mean below the random draws' (no paper number: the slides have no random control; one draw
    cannot hold), and knowledge's fall within ``knowledge_tolerance`` against the paper's.

    A retrieval task the table scores by perplexity (``<task>_ppl``: LAMBADA, as the slides) is shown
    beside the verdict, not in it (:func:`_perplexities`). Where the table has the positive control
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
    """A perplexity-scored retrieval task's rise (LAMBADA as the slides score it), ranked beside random:
    shown, not judged (a table's perplexity has no interval; its items' accuracy would be judged as the
    other tasks are)."""
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


def _pooled(row, tasks: list[str], column: str = "{}") -> float:
    """The mean of ``tasks``' percent scores in ``row`` (``column`` names each task's), in 0-1."""
    return sum(row[column.format(task)] for task in tasks) / len(tasks) / 100


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
    parts = [part(f"retrieval mean's fall, k {int(before.k)} -> {int(after.k)}", _pooled(before, retrieval),
                  _pooled(after, retrieval), n, 0.05, paper)]
    draws = int(after.random_draws) if pd.notna(after.get("random_draws")) else 1
    if with_control and len(with_control) == len(retrieval):
        pooled = round(_pooled(after, retrieval, "random_{}") * n * draws) / (n * draws)
        parts.append(part(f"random minus ranked retrieval mean at k {int(after.k)} ({draws} draw{'s' * (draws > 1)} pooled)", pooled,
                          _pooled(after, retrieval), n * draws, 0.0, None, n_second=n))
    e_kn = [at_share(claim, task, share) for task in knowledge]
    kn_chance = st.get("knowledge_chance")
    kn_paper = [e.scaled(before[task] / 100, kn_chance if kn_chance is not None else e.chance / 100)
                for task, e in zip(knowledge, e_kn) if e is not None and e.published]
    parts.append(part("knowledge's fall", _pooled(before, knowledge), _pooled(after, knowledge), n_kn,
                      st["knowledge_tolerance"], sum(kn_paper) / len(kn_paper) if kn_paper else None, above=False))
    verdict = claim_verdict(parts)
    note = ""
    if draws < 2 and len(parts) == 3 and verdict == "holds":
        verdict, note = "not resolved", " (one random draw: its spread unknown, so no 'holds')"
    shown = (f"n = {', '.join(f'{t} {k}' for t, k in zip(retrieval + knowledge, sizes + kn_sizes))} questions; "
             f"paper at {share:.1%} of the heads: {claim} rows of the paper effects' table; " + evidence(parts) + note)
    return verdict, shown


def _sum_interval(drops: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """A signed sum of (estimate, low, high) intervals by square-and-add (MOVER; their correlation
    ignored: drops on the same prompts), each term's sign in its estimate's tuple already."""
    est = sum(d for d, _, _ in drops)
    return (est, est - math.sqrt(sum((d - lo) ** 2 for d, lo, _ in drops)),
            est + math.sqrt(sum((hi - d) ** 2 for d, _, hi in drops)))


def _drop_iv(r, n: int, sign: int = 1) -> tuple[float, float, float]:
    """A ranking row's KV drop (full accuracy minus the head's) with its Newcombe-Wilson interval, times ``sign``."""
    d, lo, hi = drop_interval(r["accuracy"] + r["drop"], r["accuracy"], n)
    return (d, lo, hi) if sign > 0 else (-d, -hi, -lo)


def redundancy(fig: Path, share: float = REDUNDANCY_SHARE, rankings: dict | None = None,
               settings: dict | None = None) -> list[dict]:
    """SSM vs transformer redundancy, like with like. The models' heads differ in number per layer
    (micro: 4 attention heads per layer vs 8 Mamba-2 heads per layer, both 16 wide), so each
    model's heads are compared at an equal *share*: the summed single-head KV drops of its top
    ceil(share x heads) heads (the KV lost, head by head, by the same share of its heads; the SSM,
    with more heads, sums more of them: the comparison leans against the claim), beside the top
    head's drop (one head of the same width). Holds where both are smaller for every SSM than for
    every transformer; partly where one is. ``rankings``: {model: its full ranking csv} (the scan's);
    without them, figures/head_ranking.csv (its top heads only: the share is of those). Where the
    probe's prompts are known (``task_n["kv"]`` or ``kv_n``), each of the two is a part judged by
    :mod:`gna.report.verdict` on the interval of the least transformer-minus-SSM difference (each
    drop's Newcombe-Wilson interval, combined by square-and-add; no paper number: the slides say
    "smaller drops" in words)."""
    if rankings:
        t = pd.concat([pd.read_csv(p).assign(model=m) for m, p in rankings.items()], ignore_index=True)
    else:
        t = read_table(fig, "head_ranking.csv")
    if t is None:
        return []
    kinds = t.groupby("model").kind.agg(lambda k: "attention" if set(k) == {"attention"} else
                                        ("hybrid" if "attention" in set(k) else "ssm"))
    models = list(dict.fromkeys(t.model))
    att = [m for m in models if kinds[m] == "attention"]
    ssm = [m for m in models if kinds[m] == "ssm"]
    if not att or not ssm:
        return []
    stats = {}
    for m in att + ssm:
        sub = t[t.model == m].sort_values("rank")
        n = len(sub)
        top = max(1, math.ceil(share * n))
        per_layer = sub.groupby("layer").size()
        stats[m] = dict(n=n, top=top, single=float(sub["drop"].iloc[0]), summed=float(sub["drop"].head(top).sum()),
                        per_layer=int(per_layer.max()))
    single = max(stats[m]["single"] for m in ssm) < min(stats[m]["single"] for m in att)
    summed = max(stats[m]["summed"] for m in ssm) < min(stats[m]["summed"] for m in att)
    verdict, tested = judge(single and summed, single or summed), ""
    st = with_settings(settings)
    prompts = (st.get("task_n") or {}).get("kv") or st.get("kv_n")
    if prompts and "accuracy" in t:
        n, parts = int(prompts), []
        for label, top in (("top head's", lambda m: 1), (f"top {share:.0%}'s summed", lambda m: stats[m]["top"])):
            diffs = [_sum_interval([_drop_iv(r, n) for _, r in t[t.model == a].sort_values("rank").head(top(a)).iterrows()]
                                   + [_drop_iv(r, n, -1) for _, r in t[t.model == b].sort_values("rank").head(top(b)).iterrows()])
                     for a in att for b in ssm]
            d, lo, hi = min(diffs, key=lambda x: x[0])
            parts.append(Part(f"transformer minus SSM, the {label} KV drop", d, lo, hi, 0.0,
                              paper=effect("redundancy").scaled(1.0, 0.0), detectable=detectable_from_interval(lo, hi)))
        verdict = claim_verdict(parts)
        tested = f"; n = {n} prompts; {evidence(parts)}"
    return [dict(claim="SSM G&A is more redundant: a single SSM head matters less than the transformer's top head",
                 model=", ".join(att + ssm), verdict=verdict,
                 evidence=f"KV drop of the top {share:.0%} of each model's heads, summed over single-head ablations: "
                          + ", ".join(f"{m} {v['summed']:.2f} ({v['top']} of {v['n']} heads, {v['per_layer']} per layer)"
                                      for m, v in stats.items())
                          + "; top head alone: " + ", ".join(f"{m} {v['single']:.2f}" for m, v in stats.items())
                          + tested)]
