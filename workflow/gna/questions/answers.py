"""The open questions' verdicts in figures/findings.md, read off their tables in figures/.

Verdict words as every findings check: ``holds``, ``partly``, ``does not hold``, ``n/a``.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

INTERACTION = 0.05
"""A pair's interaction beyond this (accuracy, 0-1) counts as sub-additive (below -: the two heads do one job,
or sit in series so that either alone already breaks it) or super-additive (above +: complementary)."""
STABLE_OVERLAP = 2 / 3
"""A top k is stable when every two probe seeds share at least this share of it."""
FORMAT_RHO = 0.5
"""Formats rank heads alike when every two usable formats' Spearman rho is at least this."""


def _read(fig: Path, name: str) -> pd.DataFrame | None:
    p = Path(fig) / name
    return pd.read_csv(p) if p.is_file() else None


def _per_model(fig: Path, name: str, claim: str, judge) -> list[dict]:
    """A claim's rows from the table ``name``: ``judge(model, its rows)`` -> (verdict, evidence) per model."""
    t = _read(fig, name)
    if t is None:
        return []
    return [dict(claim=claim, model=model, **dict(zip(("verdict", "evidence"), judge(model, sub))))
            for model, sub in t.groupby("model", sort=False)]


def head_pairs(fig: Path) -> list[dict]:
    pairs, minimal = _read(fig, "head_pairs.csv"), _read(fig, "head_pairs_minimal.csv")
    if pairs is None or minimal is None:
        return []
    claim = ("Open question: the single-head ranking finds the smallest head set that takes KV retrieval to "
             "chance (greedy search by exact ablation); top pairs redundant or complementary")
    rows = []
    for model, sub in pairs.groupby("model", sort=False):
        red, comp = (sub.interaction <= -INTERACTION).sum(), (sub.interaction >= INTERACTION).sum()
        lo, hi = sub.loc[sub.interaction.idxmin()], sub.loc[sub.interaction.idxmax()]
        n_top = len(set(sub.head_a) | set(sub.head_b))
        ev = (f"{len(sub)} pairs of the top {n_top}: {red} sub-additive (redundant, or in series), {comp} "
              f"super-additive (complementary) at |interaction| >= {INTERACTION}; lowest {lo.head_a}+{lo.head_b} "
              f"{lo.interaction:+.2f}, highest {hi.head_a}+{hi.head_b} {hi.interaction:+.2f}")
        g = minimal[minimal.model == model]
        last = g.iloc[-1]
        if not bool(last.reached):
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"no set of up to {len(g)} heads takes KV accuracy to chance "
                                      f"({last.greedy_accuracy:.2f} with {last.greedy_set}); {ev}"))
            continue
        ok = last.topk_accuracy <= last.chance + last.chance_margin
        same = set(last.greedy_set.split("+")) == set(last.topk_set.split("+"))
        rows.append(dict(claim=claim, model=model, verdict="holds" if ok else "does not hold",
                         evidence=f"greedy {last.greedy_set} ({int(last.step)} heads): KV {last.baseline_accuracy:.2f} "
                                  f"-> {last.greedy_accuracy:.2f} (chance {last.chance:.2f}); top-{int(last.step)} by "
                                  f"single-head rank {last.topk_set}"
                                  f"{' (the same set)' if same else ''}: {last.topk_accuracy:.2f}; {ev}"))
    return rows


def probe_formats(fig: Path) -> list[dict]:
    def judge(model, sub):
        used = str(sub.formats_used.iloc[0]).split("+")
        skipped = [c[5:] for c in sub.columns if c.startswith("rank_") and c[5:] not in used]
        note = f"; at chance, left out: {', '.join(skipped)}" if skipped else ""
        if len(used) < 2:
            return "n/a", f"only {'/'.join(used)} above chance: nothing to compare{note}"
        rhos = {(a, b): float(np.corrcoef(sub[f"rank_{a}"], sub[f"rank_{b}"])[0, 1])
                for a, b in itertools.combinations(used, 2)}
        top = sub.sort_values("rank")
        sens = top[top.format_sensitive]
        firsts = {f: top.loc[top[f"rank_{f}"].idxmin()] for f in used}
        names = ", ".join("L{}H{} ({})".format(r.layer, r["head"], "/".join(str(int(r["rank_" + f])) for f in used))
                          for _, r in sens.head(4).iterrows())
        strongest = top.iloc[0]
        ev = (f"ranks in {'/'.join(used)}; {len(sens)} format-sensitive head(s) {names}; each format's first "
              f"{', '.join('{} L{}H{}'.format(f, r.layer, r['head']) for f, r in firsts.items())}; strongest across formats "
              f"L{strongest.layer}H{strongest['head']} (worst rank {int(strongest.worst_rank)}); Spearman over every "
              f"head {min(rhos.values()):.2f}{note}")
        same_first = len({(r.layer, r["head"]) for r in firsts.values()}) == 1
        return ("holds" if sens.empty else ("partly" if same_first else "does not hold")), ev

    return _per_model(fig, "probe_formats.csv", "Open question: the top KV heads are the same across prompt formats "
                      "(paper, compact, MMLU letter, value): no format-sensitive head in any usable format's top k", judge)


def ranking_seeds(fig: Path) -> list[dict]:
    def judge(model, sub):
        r = sub.iloc[0]
        k = int(r.top_k)
        top = sub.head(k)
        wide = top.loc[top.rank_spread.idxmax()]
        ev = (f"top-{k} overlap {r.topk_overlap:.2f} (min {r.topk_overlap_min:.2f}) over seeds {r.seeds}; largest rank "
              f"spread in the top {k}: {int(top.rank_spread.max())} (L{wide.layer}H{wide['head']}); probes {r.probe_sha256}")
        return ("holds" if r.topk_overlap_min >= STABLE_OVERLAP - 1e-9
                else "partly" if r.topk_overlap >= STABLE_OVERLAP - 1e-9 else "does not hold"), ev

    return _per_model(fig, "ranking_seeds.csv", f"Open question: the top-k of the KV ranking is stable over probe seeds "
                      f"(every two seeds share at least {STABLE_OVERLAP:.0%} of it)", judge)


PATH_SHARE = 0.5
"""A Gather feeds an Aggregate when removing it from that head's keys and values alone costs at least
this share of ablating the Gather whole."""


def ga_paths(fig: Path) -> list[dict]:
    def judge(model, sub):
        g = sub.sender.iloc[0]
        mine = sub[sub.sender == g]
        best = mine.loc[mine.drop_all_paths.idxmax()]
        cells = "; ".join(f"{r.sender} -> {r.receiver} {r.drop_all_paths:.2f} / {r.drop:.2f}" for r in sub.itertuples())
        ev = (f"{g} whole {best.sender_ablated_drop:.2f}; removed from {best.receiver}'s K/V alone "
              f"{best.drop_all_paths:.2f} (every path), {best['drop']:.2f} (its direct write); whole {best.receiver} "
              f"{best.receiver_ablated_drop:.2f}; matrix (every path / direct): {cells}")
        ok = best.sender_ablated_drop > 0 and best.drop_all_paths >= PATH_SHARE * best.sender_ablated_drop
        return ("holds" if ok else "does not hold"), ev

    return _per_model(fig, "ga_paths.csv", f"Open question: the top Gather head feeds an Aggregate head through its keys "
                      f"and values (the path alone costs at least {PATH_SHARE:.0%} of ablating the Gather whole)", judge)


def open_questions(fig: Path) -> list[dict]:
    """Every open question's rows, for gna.report.findings."""
    return head_pairs(fig) + probe_formats(fig) + ranking_seeds(fig) + ga_paths(fig)
