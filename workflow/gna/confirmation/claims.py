"""Each claim's picked conditions and parts, from the screen (see :mod:`.pick` for the rule in words).

``screen``: what the pick reads, all of it the screen's (the pick script builds it from the screen's
files): ``tasks`` (role -> task names: mmlu, knowledge, retrieval), ``n_layers``, ``minimal_depth``,
``depth`` (depth -> answers), ``layer`` (removed layer -> answers), ``keep`` (Table 1 condition ->
answers) and ``keep_heads`` (role -> [[layer, head]]), ``kv`` ((pairs, "none" | "aggregate") -> answers)
and ``kv_head`` (the Aggregate head removed), ``topk`` ((k, draw) -> answers; draw "" ranked) and
``topk_heads`` (same keys -> heads removed), ``topk_share`` (the largest k's share of the heads).
A key absent: the claim is not picked.
"""
from __future__ import annotations

from .parts import Condition, PartSpec, line_of, reference, screen_pair

KEEPING = ("both", "gather_only", "aggregate_only", "neither")


def _depth(d: int, n_layers: int, share: float = 0.0) -> Condition:
    return Condition(f"depth{d}", [{"truncate": d}], share=share)


def fig2(screen: dict, rule: dict, st: dict) -> tuple[list[Condition], list[PartSpec]]:
    """The full model, the minimal depth and the depth below it, from one forward (only the full depth costs)."""
    n, d = screen["n_layers"], screen["minimal_depth"]
    if d <= 1 or "depth" not in screen:
        return [], []
    mmlu = screen["tasks"]["mmlu"]
    full, held, fall = screen["depth"][n], screen["depth"][d], screen["depth"][d - 1]
    conds = [_depth(n, n, 1.0), _depth(d, n), _depth(d - 1, n)]
    parts = [PartSpec("fig2", f"MMLU drop to the minimal depth {d} (held)", f"depth{n}", f"depth{d}", "mmlu",
                      False, "tolerance", "fig2_held", screen=_sp(screen, full, held, mmlu)),
             PartSpec("fig2", f"MMLU drop to {d - 1} layers (collapse)", f"depth{n}", f"depth{d - 1}", "mmlu",
                      True, "collapse", "fig2_collapse", screen=_sp(screen, full, fall, mmlu))]
    return conds, parts


def fig3_layers(screen: dict, rule: dict, st: dict) -> tuple[list[int], int]:
    """The layers the rule picks (see :mod:`.pick`), largest screen MMLU drop first."""
    d, tasks = screen["minimal_depth"], screen["tasks"]
    base = screen["depth"][d]
    ref = reference(base, screen, "mmlu")
    collapse, margin = line_of("collapse", ref, st), line_of("knowledge", ref, st)
    rows = []
    for layer, answers in sorted(screen["layer"].items()):
        if layer >= d or answers.empty:
            continue
        m, k = screen_pair(base, answers, tasks["mmlu"]), screen_pair(base, answers, tasks["knowledge"])
        rows.append((layer, m, k))
    could = sorted((r for r in rows if r[1]["drop"] >= collapse), key=lambda r: (-r[1]["drop"], r[0]))
    kept = [r for r in could if r[2]["low"] < margin]
    if not kept and rule.get("fig3_fallback", "largest") == "largest":
        kept = could
    return [r[0] for r in kept[: rule.get("fig3_layers", 3)]], len(rows)


def fig3(screen: dict, rule: dict, st: dict) -> tuple[list[Condition], list[PartSpec]]:
    if "layer" not in screen:
        return [], []
    n, d, tasks = screen["n_layers"], screen["minimal_depth"], screen["tasks"]
    layers, among = fig3_layers(screen, rule, st)
    base = screen["depth"][d]
    conds, parts = [_depth(d, n, d / n)], []
    for layer in layers:
        cid = f"minimal-L{layer}"
        conds.append(Condition(cid, [{"truncate": d}, {"drop_layer": layer}], share=(d - layer) / n))
        removed = screen["layer"][layer]
        parts += [PartSpec("fig3", f"MMLU drop without L{layer}", f"depth{d}", cid, "mmlu", True, "collapse",
                           "fig3_critical", m=among, screen=_sp(screen, base, removed, tasks["mmlu"])),
                  PartSpec("fig3", f"knowledge drop without L{layer}", f"depth{d}", cid, "knowledge", False,
                           "knowledge", "fig3_knowledge", screen=_sp(screen, base, removed, tasks["knowledge"]))]
    return conds, parts


def _keep_interventions(d: int, heads: dict, condition: str) -> list:
    """The minimal model with Table 1's heads kept as the screen's job keeps them (one definition:
    :func:`gna.experiments.head_selection.keeping_plan`)."""
    from ..experiments.head_selection import keeping_plan

    return [{"truncate": d}, *keeping_plan(heads, condition)[0]]


def table1(screen: dict, rule: dict, st: dict) -> tuple[list[Condition], list[PartSpec]]:
    if "keep" not in screen or not all(c in screen["keep"] for c in KEEPING):
        return [], []
    n, d, tasks, heads = screen["n_layers"], screen["minimal_depth"], screen["tasks"], screen["keep_heads"]
    low = min(int(l) for hs in heads.values() for l, _ in hs)
    base, keep = screen["depth"][d], screen["keep"]
    conds = [_depth(d, n, d / n)] + [Condition(f"keep-{c}", _keep_interventions(d, heads, c), share=(d - low) / n)
                                     for c in KEEPING]
    parts = [PartSpec("table1", "both kept: MMLU drop from the minimal model", f"depth{d}", "keep-both", "mmlu",
                      False, "tolerance", "table1_both", screen=_sp(screen, base, keep["both"], tasks["mmlu"]))]
    parts += [PartSpec("table1", f"MMLU fall, both kept -> {c.replace('_', ' ')}", "keep-both", f"keep-{c}", "mmlu",
                       True, "collapse", f"table1_{c}", screen=_sp(screen, keep["both"], keep[c], tasks["mmlu"]))
              for c in KEEPING[1:]]
    parts += [PartSpec("table1", f"knowledge drop from the minimal model, {c.replace('_', ' ')}", f"depth{d}",
                       f"keep-{c}", "knowledge", False, "knowledge", "table1_knowledge",
                       screen=_sp(screen, base, keep[c], tasks["knowledge"])) for c in KEEPING]
    return conds, parts


def fig4(screen: dict, rule: dict, st: dict) -> tuple[list[Condition], list[PartSpec]]:
    if "kv" not in screen or not screen.get("kv_head"):
        return [], []
    n = screen["n_layers"]
    pairs = sorted({p for p, _ in screen["kv"]})
    lo, hi = pairs[0], pairs[-1]
    head = [list(screen["kv_head"])]
    conds = [c for p in (lo, hi) for c in (Condition(f"kv{p}-full", [], share=1.0, kv=p),
                                           Condition(f"kv{p}-noagg", [{"ablate_heads": head}],
                                                     share=(n - int(head[0][0])) / n, kv=p))]
    kv = screen["kv"]
    low_pair = screen_pair(kv[(lo, "none")], kv[(lo, "aggregate")], sorted(set(kv[(lo, "none")].task)))
    high_pair = screen_pair(kv[(hi, "none")], kv[(hi, "aggregate")], sorted(set(kv[(hi, "none")].task)))
    part = PartSpec("fig4", f"growth of the drop without the Aggregate head, {lo} -> {hi} pairs", f"kv{hi}-full",
                    f"kv{hi}-noagg", f"kv{hi}", True, "growth", None, pair=(f"kv{lo}-full", f"kv{lo}-noagg", f"kv{lo}"),
                    screen={"high": high_pair, "low": low_pair, "drop": high_pair["drop"] - low_pair["drop"]})
    return conds, [part]


def topk(screen: dict, rule: dict, st: dict) -> tuple[list[Condition], list[PartSpec]]:
    if "topk" not in screen:
        return [], []
    n, tasks, found = screen["n_layers"], screen["tasks"], screen["topk"]
    k = max(k for k, _ in found)
    draws = sorted(dr for kk, dr in found if kk == k and dr)

    def cond(key) -> Condition:
        heads = screen["topk_heads"][key]
        low = min([n] + [int(h[0]) for h in heads])
        return Condition(f"topk{key[0]}{key[1]}", [{"ablate_heads": heads}] if heads else [], share=(n - low) / n)

    conds = [Condition("topk0", [], share=1.0), cond((k, ""))] + [cond((k, dr)) for dr in draws]
    base, ranked = found[(0, "")], found[(k, "")]
    share = screen.get("topk_share", 0.0)
    parts = [PartSpec("topk", f"retrieval's fall, k 0 -> {k}", "topk0", f"topk{k}", "retrieval", True, "tolerance",
                      f"topk@{share}", screen=_sp(screen, base, ranked, tasks["retrieval"])),
             PartSpec("topk", f"knowledge's fall, k 0 -> {k}", "topk0", f"topk{k}", "knowledge", False, "knowledge",
                      f"topk@{share}", screen=_sp(screen, base, ranked, tasks["knowledge"], "retrieval"))]
    # the random draws score the retrieval tasks their part judges (random minus ranked), not the suite;
    # judged at the level of the draws (each draw's difference on the same fresh items, a t interval)
    if len(draws) >= 2:
        screens = [_sp(screen, found[(k, dr)], ranked, tasks["retrieval"]) for dr in draws]
        worst = max(screens, key=lambda x: x["discordance"])
        parts.append(PartSpec("topk", f"random minus ranked retrieval at k {k} ({len(draws)} draws)", f"topk{k}",
                              f"topk{k}", "retrieval", True, "zero", None, draws=[f"topk{k}{dr}" for dr in draws],
                              screen=worst))
        # the positive control where the screen scored it: the KV probe beside the tasks, the same way
        kv = sorted(t for t in set(ranked.task) if str(t).startswith("kv_n"))
        if kv:
            pairs = int(kv[0].split("_")[1][1:])
            screens = [screen_pair(found[(k, dr)], ranked, kv) for dr in draws]
            parts.append(PartSpec("topk", f"KV control: random minus ranked KV at k {k} ({len(draws)} draws)",
                                  f"topk{k}", f"topk{k}", f"kv{pairs}", True, "zero", None,
                                  draws=[f"topk{k}{dr}" for dr in draws],
                                  screen=max(screens, key=lambda x: x["discordance"])))
    return conds, parts


def _sp(screen: dict, first, second, tasks, ref_role: str | None = None) -> dict:
    """The screen's pair, with the first condition's reference accuracies (:func:`.pick.reference`)."""
    role = ref_role or ("retrieval" if list(tasks) == list(screen["tasks"].get("retrieval", ())) else "mmlu")
    return {**screen_pair(first, second, tasks), "ref": reference(first, screen, role)}
