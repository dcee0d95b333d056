"""The open questions' verdicts in figures/findings.md, read off their tables in figures/.

Verdict words as every findings check: ``holds``, ``partly``, ``does not hold``, ``n/a``, and
``not resolved`` where the interval a verdict rests on straddles its threshold or null (the rule of
:mod:`gna.report.verdict`; the open questions are ours, so no paper effect enters). Every row
names its n (prompts, and probe seeds where pooled) and the interval or test it rests on
(:mod:`gna.questions.null`).

The claim-checks layer of the open questions (``open_questions``, judging the tables of ``head_pairs``,
``probe_formats``, ``ranking_seeds`` and ``ga_paths``). One concept at three layers, for the family: :mod:`gna.questions`
computes the rows, :mod:`gna.report.open_questions` draws the tables and figures, this module judges them
(quoted in the manual by :mod:`gna.report.quote`).
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from ..verdict import Part
from .verdicts import not_applicable, read_table


def _per_model(fig: Path, name: str, claim: str, judge) -> list[dict]:
    """A claim's rows from the table ``name``: ``judge(model, its rows)`` -> (verdict, evidence) per model."""
    t = read_table(fig, name)
    if t is None:
        return []
    return [dict(claim=claim, model=model, **dict(zip(("verdict", "evidence"), judge(model, sub))))
            for model, sub in t.groupby("model", sort=False)]


def _iv(est, low, high, digits=2) -> str:
    return f"{est:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _against(low: float, high: float, line: float, below_holds: bool = True) -> str:
    """The verdict of an interval against a threshold, by the findings' one rule
    (:mod:`gna.report.verdict`; an open question has no paper effect: the line alone decides)."""
    return Part("interval", (low + high) / 2, low, high, line, above=not below_holds).verdict


def minimal_set(fig: Path) -> list[dict]:
    """The smallest head sets that take KV accuracy to chance + margin (exhaustive search): the
    single-head ranking's top k of that size holds where it is one of them and its interval lies at or
    under the line; not resolved where the interval straddles it."""
    minimal = read_table(fig, "head_pairs_minimal.csv")
    if minimal is None or "best_set" not in minimal:
        return []
    claim = ("Open question: the single-head ranking's top k is the smallest head set that takes KV retrieval to "
             "chance (exhaustive search over the candidate pool, bootstrap interval over prompts)")
    rows = []
    for model, g in minimal.groupby("model", sort=False):
        last = g.iloc[-1]
        if not bool(last.reached):
            why = last.note if isinstance(last.get("note"), str) and last.note else "no set reaches the line"
            rows.append(not_applicable(claim, model,
                                       f"{why}; pool {last.get('pool_rule', '')}, up to {int(last['size'])} heads"))
            continue
        line = last.chance + last.chance_margin
        ties = str(last.tying_sets).split()
        in_ties = last.topk_set in ties
        verdict = _against(last.topk_low, last.topk_high, line) if in_ties else "does not hold"
        rows.append(dict(claim=claim, model=model, verdict=verdict, evidence=(
            f"n = {int(last.n_examples)} prompts; pool: {last.pool_rule}; smallest size {int(last['size'])}: "
            f"{int(last.n_reaching)} of {int(last.sets_tried)} sets reach chance + {last.chance_margin:.2f} = "
            f"{line:.3f} ({' '.join(ties[:6])}{' ...' if len(ties) > 6 else ''}); best {last.best_set} KV "
            f"{last.baseline_accuracy:.3f} -> {_iv(last.best_accuracy, last.best_low, last.best_high, 3)}; top-"
            f"{int(last['size'])} by single-head rank {last.topk_set} {_iv(last.topk_accuracy, last.topk_low, last.topk_high, 3)}"
            + ("" if in_ties else " (not at the line)")
            + ("; the interval straddles the line" if verdict == "not resolved" else ""))))
    return rows


def head_pairs(fig: Path) -> list[dict]:
    """Pairs of the top heads against independence on the above-chance scale: holds where at least one
    pair's interval (familywise over the pairs) excludes independence, not resolved where none does."""
    pairs = read_table(fig, "head_pairs.csv")
    if pairs is None or "interaction_low" not in pairs:
        return []
    claim = ("Open question: pairs of the top heads interact beyond independence (on the above-chance scale; "
             "below it: overlapping, in series or one mechanism; above: redundant, one covers for the other)")
    rows = []
    for model, sub in pairs.groupby("model", sort=False):
        resolved = sub[sub.reading != "not resolved"]
        first = sub.iloc[0]
        n_top = len(set(sub.head_a) | set(sub.head_b))

        def show(r):
            return (f"{r.head_a}+{r.head_b} {_iv(r.interaction, r.interaction_low, r.interaction_high)} "
                    f"({r.reading})")
        ev = (f"n = {int(first.n_examples)} prompts; {len(sub)} pairs of the top {n_top}, bootstrap intervals at "
              f"{first.interval_level:.1%} (familywise over the pairs): {len(resolved)} beyond independence"
              + (": " + "; ".join(show(r) for r in resolved.itertuples()) if len(resolved) else "")
              + f"; top pair {show(first)}, its additive interaction {first.additive_interaction:+.2f} (capped by "
              f"the floor at chance: no test), on the log-prob margin "
              f"{_iv(first.margin_interaction, first.margin_interaction_low, first.margin_interaction_high)} (additive null)")
        rows.append(dict(claim=claim, model=model, verdict="holds" if len(resolved) else "not resolved", evidence=ev))
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
    """The heads beyond noise keep their places over prompts and probe seeds: holds where their rank
    intervals (bootstrap: seeds, then prompts) stay within 1..k (k: the heads beyond noise, at most
    top_k) and every other head's lie above k; not resolved where one straddles."""
    def judge(model, sub):
        sub = sub.sort_values("pooled_rank")
        r = sub.iloc[0]
        k = int(r.stable_k)
        name = lambda x: f"L{x.layer}H{x['head']}" + ("" if x.kind == "attention" else x.kind[0])  # noqa: E731
        shown = lambda x: f"{name(x)} {int(x.pooled_rank)} [{x.rank_low:.0f}, {x.rank_high:.0f}] (drop {x.pooled_drop:.3f})"  # noqa: E731
        nxt = sub[sub.pooled_rank > k].head(3)
        ev = (f"n = {int(r.n_prompts)} prompts over seeds {r.seeds}; {k} of {len(sub)} heads beyond noise (exact "
              f"McNemar, 5% familywise); pooled rank [95% interval]: "
              + ", ".join(shown(x) for _, x in sub.head(k).iterrows())
              + "; next " + ", ".join(shown(x) for _, x in nxt.iterrows()) + " (within noise)"
              + f"; top-{int(r.top_k)} overlap {r.topk_overlap:.2f} (min {r.topk_overlap_min:.2f}), its places past "
              f"{k} within noise; probes {r.probe_sha256}")
        if k == 0:
            return "n/a", ev
        return ("holds" if bool(r.stable) else "not resolved"), ev

    return _per_model(fig, "ranking_seeds.csv", "Open question: the top of the KV ranking is stable over probe seeds: "
                      "the heads beyond noise keep their places (rank intervals over prompts and seeds)", judge)


PATH_SHARE = 0.5
"""A Gather feeds an Aggregate (in series) when removing it from that head's inputs alone costs at least
this share of ablating the Gather whole."""
_SHOWN = (("all", "q", "all", "Q"), ("all", "k", "all", "K"), ("all", "v", "all", "V"),
          ("all", "kv", "all", "K/V"), ("all", "kv", "values", "K/V at the value tokens"),
          ("all", "q", "final", "Q at the final positions"), ("direct", "kv", "all", "its own write into K/V"))


def ga_paths(fig: Path) -> list[dict]:
    """Path patching: holds where the strongest path from the top Gather into a later head (every path,
    one component or several, at some positions) costs at least PATH_SHARE of the Gather's whole drop
    beyond its interval; not resolved where the interval straddles it."""
    def judge(model, sub):
        if "target" not in sub:
            return "n/a", "path patching table without its components (rerun ga_paths)"
        g = sub.sender.iloc[0]
        mine = sub[(sub.sender == g) & (sub.target == "head")]
        best = mine.loc[mine["drop"].idxmax()]
        line = PATH_SHARE * best.sender_ablated_drop
        into = mine[mine.receiver == best.receiver]
        cells = []
        for via, comps, pos, label in _SHOWN:
            hit = into[(into.via == via) & (into.components == comps) & (into.positions == pos)]
            if len(hit):
                h = hit.iloc[0]
                cells.append(f"{label} {_iv(h['drop'], h.drop_low, h.drop_high, 3)}")
        logits = sub[(sub.sender == g) & (sub.target == "logits")]
        carry = [label for via, comps, pos, label in _SHOWN[:3]
                 if len(x := into[(into.via == via) & (into.components == comps) & (into.positions == pos)])
                 and x.iloc[0].drop_low >= line]
        ev = (f"n = {int(best.n_examples)} prompts; {g} ablated whole "
              f"{_iv(best.sender_ablated_drop, best.sender_ablated_low, best.sender_ablated_high, 3)}; removed only from "
              f"{best.receiver}'s input (every path unless said): " + "; ".join(cells)
              + (f"; {g}'s direct write to the logits (another path) {_iv(logits.iloc[0]['drop'], logits.iloc[0].drop_low, logits.iloc[0].drop_high, 3)}"
                 if len(logits) else "")
              + f"; {best.receiver} whole {best.receiver_ablated_drop:.3f}"
              + (f"; carried through {', '.join(carry)} (each at least {PATH_SHARE:.0%} of the whole beyond its "
                 "interval)" if carry else ""))
        return _against(best.drop_low, best.drop_high, line, below_holds=False) if best.sender_ablated_drop > 0 \
            else "does not hold", ev

    return _per_model(fig, "ga_paths.csv", f"Open question: the top Gather head feeds an Aggregate head in series "
                      f"(path patching: removed from that head's query, key or value alone it costs at least "
                      f"{PATH_SHARE:.0%} of ablating the Gather whole)", judge)


def open_questions(fig: Path) -> list[dict]:
    """Every open question's rows, for gna.report.findings."""
    return minimal_set(fig) + head_pairs(fig) + probe_formats(fig) + ranking_seeds(fig) + ga_paths(fig)
