"""Findings on single heads: Table 1 (keeping the two G&A heads) and Fig. 4 (KV pairs).

The claim-checks layer of the head experiments ``head_keeping`` and ``kv_pairs`` (top-k removal's are
:mod:`.topk`, the scan's :mod:`.head_scan`). One concept at two layers: :mod:`gna.report.heads` makes
these tables, this module judges them (the heads come from :mod:`gna.experiments.head_selection`).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..common import chance_of, near_chance
from .pruning import minimal_model
from ...evaluation.power import detectable_from_interval
from ..verdict import Part, claim_verdict, evidence
from .paper import effect
from .sampled import Drop, acc, drop, drop_interval, n_of, part, picked, read_answers, resolved
from .verdicts import (capped, judge, knowledge_chance, knowledge_line, knowledge_untestable, not_applicable,
                       read_table, with_settings)

def head_keeping(fig: Path, settings: dict | None = None, answers: str | None = None,
                 tasks: dict | None = None, minimal_answers: str | None = None) -> list[dict]:
    """Table 1, all four conditions: both heads kept, MMLU within ``tolerance`` of the minimal model's
    (not below it by more); gather only, aggregate only, neither: MMLU near chance; knowledge within
    ``knowledge_tolerance`` of the minimal model's in all four. With one critical layer (its heads under
    ``gather``, none under ``aggregate``) only 'both' and 'neither' are run, and the checks are those
    two's. Where the questions' number is known (:func:`.sampled.n_of`: ``task_n`` or ``mmlu_n``) the
    checks are parts judged by :mod:`gna.report.verdict` on their intervals against the paper's Table 1
    (the effects' table, :func:`_keeping_parts`), paired where the jobs kept their answers: ``answers``, a
    template of ``model``, ``source`` and ``condition``; ``tasks``, the MMLU column's (``{"mmlu": [...]}``);
    ``minimal_answers``, the minimal model's (a gradual depth's: a template of ``model`` and ``depth``).
    Without it, thresholds on the point estimates (:func:`_keeping_failures`): 'holds' needs every check;
    'partly' where keeping both heads is still 10 points above every other condition. At most 'partly'
    where the minimal model's knowledge is near ``knowledge_chance`` (knowledge flat cannot fail)."""
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
            rows.append(not_applicable(claim, f"{model} ({source} heads)", str(by_condition["note"].dropna().iloc[0])
                                       if "note" in by_condition and by_condition["note"].notna().any() else "not run"))
            continue
        label = _keeping_label(model, source, by_condition.iloc[0])
        run = [c for c in KEEPING if pd.notna(by_condition["mmlu"].get(c))]
        found = minimal_model(fig, model, thresholds["tolerance"])
        ref = found[1:] if found is not None else None
        if ref is not None and near_chance(ref[0], chance, 100):
            rows.append(not_applicable(claim, label, f"the minimal model is near chance on MMLU ({ref[0]:.1f})"))
            continue
        mmlu, knowledge = by_condition["mmlu"], by_condition["knowledge"]
        failed = _keeping_failures(mmlu, knowledge, run, ref, thresholds, chance)
        other_run = [c for c in KEEPING[1:] if c in run]
        best = max(other_run, key=lambda c: mmlu[c])
        verdict = judge(not failed, mmlu["both"] - mmlu[best] >= 10)
        n, n_kn = n_of(thresholds, "mmlu"), n_of(thresholds, "knowledge")
        sampled, parts = "", []
        if n:   # both kept against the best of the others, beyond noise: a pick, so at Bonferroni's level
            keys = dict(model=model, source=source)
            pairs = {cond: read_answers(answers, **keys, condition=cond) for cond in run}
            pairs["minimal"] = read_answers(minimal_answers, model=model, depth=found[0]) if found else None
            gap, sampled = _best_other_gap(mmlu, best, len(other_run), n, pairs, (tasks or {}).get("mmlu", ()))
            if ref is not None and n_kn:
                parts = _keeping_parts(ref, mmlu, knowledge, run, n, n_kn, thresholds, chance, pairs,
                                       (tasks or {}).get("mmlu", ()), (tasks or {}).get("knowledge", ()))
                verdict = claim_verdict(parts)
            else:
                verdict = resolved(verdict, gap.beyond)
        untestable = knowledge_untestable(ref[1], thresholds, 100) if ref is not None else ""
        rows.append(dict(claim=claim, model=label, verdict=capped(verdict, untestable),
                         evidence=_keeping_scores(ref, mmlu, knowledge, run) + sampled
                                  + (f" (failed: {'; '.join(failed)})" if failed else "")
                                  + (f" ({untestable})" if untestable else "")
                                  + (f"; {evidence(parts)}" if parts else "")))
    return rows


KEEPING = ("both", "gather_only", "aggregate_only", "neither")


def _best_other_gap(mmlu, best: str, others: int, n: int, pairs: dict, mmlu_tasks) -> tuple[Drop, str]:
    """(the drop, as the findings print it) from both kept to the best of the ``others`` conditions run
    (percent in): a pick, so at Bonferroni's level for their number."""
    gap = drop(mmlu["both"] / 100, mmlu[best] / 100, n, (pairs["both"], pairs[best], mmlu_tasks), m=others)
    return gap, (f"; n = {n} questions: MMLU both {acc(mmlu['both'] / 100, n)}, the best other "
                 f"{acc(mmlu[best] / 100, n)}, {gap.text}" + (f" ({picked(others)})" if others > 1 else ""))


def _keeping_label(model: str, source: str, first) -> str:
    """How Table 1's findings name a model and its kept heads (``first``: a row of its conditions)."""
    one_layer = not isinstance(first.get("aggregate"), str) or not first.get("aggregate")
    odd = str(first["unclassified"]).split() if pd.notna(first.get("unclassified")) else []
    if one_layer:
        return f"{model} ({source} heads {first['gather']}, one critical layer)"
    return (f"{model} ({source} heads {first['gather']} + {first['aggregate']}"
            + (f"; {' '.join(odd)}: the role's pattern, unclassified by the ranking" if odd else "") + ")")


def _keeping_failures(mmlu, knowledge, run: list[str], ref: tuple[float, float] | None, st: dict,
                      chance: float) -> list[str]:
    """What of Table 1 fails on the point estimates (percent), in words: both kept below the minimal
    model's MMLU (``ref``: its MMLU, knowledge) by more than ``tolerance``, another condition's MMLU not
    near chance, a condition's knowledge off the minimal model's by more than ``knowledge_tolerance``."""
    failed = []
    if ref is None:
        failed.append("the minimal model's scores are not in this run")
    elif mmlu["both"] < ref[0] - 100 * st["tolerance"]:
        failed.append(f"both kept: MMLU {mmlu['both']:.1f} below the minimal model's {ref[0]:.1f} by more "
                      f"than {100 * st['tolerance']:.0f}")
    for cond in (c for c in KEEPING[1:] if c in run):
        if not near_chance(mmlu[cond], chance, 100):
            failed.append(f"{cond.replace('_', ' ')}: MMLU {mmlu[cond]:.1f} not near chance")
    if ref is not None:
        off = [cond for cond in run if abs(knowledge[cond] - ref[1]) > 100 * st["knowledge_tolerance"]]
        if off:
            failed.append("knowledge off the minimal model's in " + ", ".join(cond.replace("_", " ") for cond in off))
    return failed


def _keeping_scores(ref: tuple[float, float] | None, mmlu, knowledge, run: list[str]) -> str:
    """Table 1's scores as the findings print them, the paper's MMLU beside them."""
    return ((f"minimal model MMLU {ref[0]:.1f}, knowledge {ref[1]:.1f}; " if ref else "")
            + "MMLU " + ", ".join(f"{cond.replace('_', ' ')} " + (f"{mmlu[cond]:.1f}" if cond in run else "n/a")
                                  for cond in KEEPING)
            + "; knowledge " + " / ".join(f"{knowledge[cond]:.1f}" if cond in run else "n/a" for cond in KEEPING)
            + f" (paper: MMLU {_paper_table1()})")


def _paper_table1() -> str:
    """The paper's Table 1 MMLU, both / gather only / aggregate only / neither, from the effects' table."""
    return " / ".join(f"{effect(f'table1_{cond}').after:.1f}" for cond in KEEPING)


def _keeping_parts(ref: tuple[float, float], mmlu, knowledge, run: list[str], n: int, n_kn: int, st: dict,
                   chance: float, pairs: dict, mmlu_tasks, knowledge_tasks=()) -> list[Part]:
    """Table 1's parts (accuracies in percent in, 0-1 in the parts): both kept, MMLU's drop from the minimal
    model (``ref``: its MMLU, knowledge) within ``tolerance`` against the paper's none (paired on the
    minimal model's answers, ``pairs["minimal"]``, where kept); each other condition, MMLU's fall from both kept beyond
    ``collapse`` of both's above-chance MMLU against the paper's (paired on ``pairs``, each condition's
    answers, where kept); knowledge's largest drop from the minimal model over the conditions within the
    knowledge margin (:func:`.verdicts.knowledge_line`) against the paper's: the largest of the conditions
    run, so its interval is Bonferroni-adjusted for their number (paired on the knowledge tasks' answers,
    ``knowledge_tasks``, where kept)."""
    both = mmlu["both"] / 100
    parts = [part("both kept: MMLU drop from the minimal model", ref[0] / 100, both, n, st["tolerance"],
                  effect("table1_both").scaled(ref[0] / 100, chance), above=False,
                  answers=(pairs.get("minimal"), pairs.get("both"), mmlu_tasks))]
    parts += [part(f"MMLU fall, both kept -> {cond.replace('_', ' ')}", both, mmlu[cond] / 100, n,
                   st["collapse"] * (both - chance), effect(f"table1_{cond}").scaled(both, chance),
                   answers=(pairs.get("both"), pairs.get(cond), mmlu_tasks))
              for cond in run if cond != "both"]
    worst = max(run, key=lambda cond: ref[1] - knowledge[cond])
    kn = effect("table1_knowledge")
    kn_pairs = (pairs.get("minimal"), pairs.get(worst), knowledge_tasks) if knowledge_tasks else None
    parts.append(part(f"knowledge drop from the minimal model, {worst.replace('_', ' ')} (the largest)", ref[1] / 100,
                      knowledge[worst] / 100, n_kn, knowledge_line(ref[1] / 100, st),
                      kn.scaled(ref[1] / 100, knowledge_chance(st, kn)), above=False,
                      answers=kn_pairs, m=len(run)))
    return parts


def kv_pairs(fig: Path, settings: dict | None = None, prompts: int | None = None,
             answers: str | None = None) -> list[dict]:
    """Fig. 4: the drop without the Aggregate head grows with the pairs: by 0.05 at least from the
    fewest to the most pairs. Where the prompts per probe set are known (``task_n["kv"]`` or
    ``kv_n``), judged by :mod:`gna.report.verdict` on the growth's interval (:func:`_growth_part`);
    else beyond the probe seeds' spread (the lowest drop at the most pairs above the highest at the
    fewest). n/a where the full model is near chance (1 / pairs) at the fewest pairs, or no head is
    classified Aggregate."""
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
            rows.append(not_applicable(claim, model, f"the full model is near chance on KV retrieval "
                                                     f"({full.accuracy.iloc[0]:.2f} at {int(n0)} pairs)"))
            continue
        drops, accs = _kv_drops(sub, full, (n0, n1))
        if "no_aggregate" not in drops:
            rows.append(not_applicable(claim, model, "no head classified Aggregate among the top heads"))
            continue
        (a0, _, a0_hi), (a1, a1_lo, _) = drops["no_aggregate"]
        growth, apart = a1 - a0, a1_lo > a0_hi
        g = drops.get("no_gather")
        seeds = int(sub.probe_seeds.max()) if "probe_seeds" in sub else 1
        prompts = prompts or (st.get("task_n") or {}).get("kv") or st.get("kv_n")
        verdict = judge(growth >= 0.05 and apart, growth > 0)
        tested = ""
        if prompts:
            growth_part = _growth_part(answers, model, sub, full, accs["no_aggregate"], (n0, n1), int(prompts) * seeds)
            verdict = claim_verdict([growth_part])
            tested = (f"; n = {int(prompts)} prompts x {seeds} probe seeds = {int(prompts) * seeds} per point; "
                      f"{evidence([growth_part])} "
                      f"(Fig. 4: {effect('fig4_growth').source.split(': ')[-1]})")

        def fmt(d):
            return f"{d[0]:.2f}" + (f" [{d[1]:.2f}, {d[2]:.2f}]" if d[1] != d[2] else "")
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"drop without {_role_head(sub, 'no_aggregate', 'Aggregate')} "
                                  f"{fmt(drops['no_aggregate'][0])} at {int(n0)} pairs -> "
                                  f"{fmt(drops['no_aggregate'][1])} at {int(n1)}"
                                  + (f"; without {_role_head(sub, 'no_gather', 'Gather')} {fmt(g[0])} -> {fmt(g[1])}"
                                     if g else "")
                                  + f" (mean [min, max] over {seeds} probe seeds)"
                                  + ("" if apart or growth < 0.05 else "; the growth is within the probe spread")
                                  + tested))
    return rows


def _kv_drops(sub: pd.DataFrame, full: pd.DataFrame, ends) -> tuple[dict, dict]:
    """({condition: [(drop, min, max) at each of ``ends``]}, {condition: its accuracy by pairs}) of the
    heads removed (no_gather, no_aggregate: those the table has), the spread over the probe seeds."""
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
        drops[cond] = [(c["drop"][n], lo[n], hi[n]) for n in ends]
    return drops, accs


def _growth_part(answers: str | None, model: str, sub: pd.DataFrame, full: pd.DataFrame, removed, ends,
                 n: int) -> Part:
    """The growth of the drop without the Aggregate head from the fewest to the most pairs (``ends``),
    against a line of 0.05: each drop's interval over the prompts pooled over probe seeds (``n``; paired
    where both conditions kept their answers, else Newcombe-Wilson), the two combined by square-and-add;
    the paper publishes curves only, so the line alone refutes."""
    n0, n1 = ends
    paired = _kv_pairs_paired(answers, model, sub, ends)
    if paired is not None:
        drops = [(p.difference, *p.interval()) for p in paired]
        how, n = "paired per prompt and probe seed", paired[0].n
    else:
        drops = [drop_interval(full.accuracy[x], removed[x], n) for x in ends]
        how = "unpaired: no per-prompt answers kept"
    (d0, l0, u0), (d1, l1, u1) = drops
    low, high = (d1 - d0) - math.hypot(d1 - l1, u0 - d0), (d1 - d0) + math.hypot(u1 - d1, d0 - l0)
    removed_head = "the top Aggregate-pattern head (unclassified)" if _by_pattern(sub, "no_aggregate") else "Aggregate"
    return Part(f"growth of the drop without {removed_head}, {int(n0)} -> {int(n1)} pairs", d1 - d0, low,
                high, 0.05, paper=effect("fig4_growth").scaled(full.accuracy[n0], 1 / n0),
                detectable=detectable_from_interval(low, high), n=n, paired=paired is not None,
                method=how + "; the two ends (other prompts) by square-and-add")


def _by_pattern(sub: pd.DataFrame, condition: str) -> bool:
    """Whether the head ``condition`` removes was picked by its pattern and left unclassified by the
    ranking (``heads_from``, :func:`gna.experiments.head_selection.unclassified`)."""
    c = sub[sub.condition == condition]
    return "heads_from" in c and not c.empty and str(c.heads_from.iloc[0]).startswith("pattern")


def _role_head(sub: pd.DataFrame, condition: str, role: str) -> str:
    """How Fig. 4's findings name a removed head: the role's name only where the scan classifies it so
    (:func:`_by_pattern`), else what it is."""
    c = sub[sub.condition == condition]
    head = str(c["head"].iloc[0]) if "head" in c and not c.empty else ""
    if _by_pattern(sub, condition):
        return f"the top {role}-pattern head {head}, unclassified,"
    return f"{role} ({head})" if head else role


def _probe_sets(tasks, n_pairs: int) -> list[str]:
    """The task names among ``tasks`` of the probe sets of ``n_pairs`` pairs, one per probe seed."""
    from ...probes.kv import is_probe_task, parse_probe_task

    named = {str(t): parse_probe_task(t) for t in set(tasks) if is_probe_task(t)}
    return sorted(t for t, (pairs, seed) in named.items() if pairs == n_pairs and seed is not None)


def _kv_pairs_paired(template: str | None, model: str, sub: pd.DataFrame, ends) -> list | None:
    """At each of ``ends`` (numbers of pairs), the full model against the Aggregate head removed, item by
    item over the probe seeds' prompts (tasks ``gna.probes.kv.probe_task_name(pairs, seed)``), or None where either condition
    kept no answers (or they are not the table's)."""
    from ...evaluation.paired import PairingError, pooled

    if template is None:
        return None
    full, removed = (read_answers(template, model=model, condition=c) for c in ("full", "no_aggregate"))
    if full is None or removed is None:
        return None
    out = []
    for x in ends:
        tasks = _probe_sets(full.task, int(x))
        try:
            counts = pooled(full, removed, tasks) if tasks else None
        except PairingError:
            return None
        if counts is None:
            return None
        table = sub[sub.n_pairs == x].set_index("condition").accuracy
        if abs(counts.difference - (table["full"] - table["no_aggregate"])) > 0.01:
            return None   # the answers of another run than the table's
        out.append(counts)
    return out
