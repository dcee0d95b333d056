"""Head selections derived from the scan: G&A heads, top-k sets, head-keeping conditions.

The heads the head experiments remove or keep (``head_keeping``, ``kv_pairs``, ``topk_removal``,
``arc_chat``, ``hybrid_attention``; the heatmaps and the confirmation read them too), read off the scan:
computation those experiments share, so no one experiment's module.

Two readings of a role's "top head" (``heads_by``: Fig. 4's ``kv_pairs.heads_by``, and Table 1's on the
scan's heads; :func:`scan_head`):

- ``role``: the highest-ranked head the scan classifies in that role: its mixing pattern is the role's
  *and* its KV drop is beyond the probe's noise (gna.scan: a label the noise test can take away);
- ``pattern``: the highest-ranked of the scan's classified heads (``ga.csv``: its top ``classify_top``)
  whose pattern alone is the role's: that score at least the classification's ``threshold`` and at
  least the other score (the classification's own tie rule), whatever its drop. A head the noise test
  unlabelled (Qwen2.5-Coder's L22H7: aggregate score 0.38, drop under the bar) is then still Fig. 4's
  Aggregate head, which is what the figure asks: does removing the head that reads like an
  Aggregate head cost more as the dictionary grows.
"""
from __future__ import annotations

import random

import pandas as pd

from .pruning import below_floor

ROLES = ("gather", "aggregate")


def pattern_head(ga: pd.DataFrame, role: str, threshold: float) -> list | None:
    """``[layer, head, kind]`` of the highest-ranked head of ``ga`` whose pattern is ``role``'s, or None."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")
    other = ROLES[1 - ROLES.index(role)]
    mine, theirs = ga[f"{role}_score"], ga[f"{other}_score"]
    # the classification's tie rule: equal scores read as aggregate
    wins = mine >= theirs if role == "aggregate" else mine > theirs
    hits = ga[(mine >= threshold) & wins].sort_values("rank")
    if hits.empty:
        return None
    r = hits.iloc[0]
    return [int(r.layer), int(r["head"]), str(r.kind)]


def head_names(heads, empty: str = "") -> str:
    """``"L4H2 L5H2"``: heads ``[layer, head(, kind)]`` as a result row names them; ``empty`` for none."""
    return " ".join(f"L{h[0]}H{h[1]}" for h in heads) or empty


def top_role_head(ga: pd.DataFrame, role: str) -> list | None:
    """The highest-ranked head classified as ``role`` (``gather``/``aggregate``), or None."""
    hits = ga[ga.role == role].sort_values("rank")
    if hits.empty:
        return None
    r = hits.iloc[0]
    return [int(r.layer), int(r["head"]), str(r.kind)]


def unclassified(ga: pd.DataFrame | None, heads: list[list], role: str) -> list[str]:
    """``L<layer>H<head>`` of each of ``heads`` that the scan (``ga``: its classified top heads) does not
    classify as ``role``: a head picked by its pattern alone, which the findings must not call the
    role's head (the ranking left it unclassified). Empty without ``ga``."""
    if ga is None or not heads:
        return []
    named = {(int(r.layer), int(r["head"])) for _, r in ga[ga.role == role].iterrows()}
    return [f"L{h[0]}H{h[1]}" for h in heads if (int(h[0]), int(h[1])) not in named]


def scan_head(ga: pd.DataFrame, role: str, heads_by: str = "role", threshold: float | None = None) -> list | None:
    """The scan's top head in ``role``, read as ``heads_by`` says (the module docstring):
    ``role``, the top head classified so (:func:`top_role_head`); ``pattern``, the top head whose
    pattern alone is the role's, scores against ``threshold`` (:func:`pattern_head`). Or None."""
    if heads_by == "pattern":
        return pattern_head(ga, role, threshold)
    if heads_by == "role":
        return top_role_head(ga, role)
    raise ValueError(f"the scan's heads by {heads_by!r}: not one of role, pattern")


def top_heads(ranking: pd.DataFrame, k: int, kinds=None) -> list[list]:
    df = ranking if kinds is None else ranking[ranking.kind.isin(kinds)]
    return [[int(r.layer), int(r.head), str(r.kind)] for r in df.sort_values("rank").head(k).itertuples()]


def random_heads(ranking: pd.DataFrame, k: int, seed: int, kinds=None) -> list[list]:
    """``k`` heads drawn uniformly (the "same budget, not ranked" control)."""
    df = ranking if kinds is None else ranking[ranking.kind.isin(kinds)]
    rows = sorted((int(r.layer), int(r.head), str(r.kind)) for r in df.itertuples())
    return [list(h) for h in random.Random(seed).sample(rows, k)]


KEEPING_CONDITIONS = ("both", "aggregate_only", "gather_only", "neither")
ROLES_KEPT = {"both": ("gather", "aggregate"), "gather_only": ("gather",), "aggregate_only": ("aggregate",),
              "neither": ()}


def named_role_heads(named: dict | None, kinds=None) -> dict[str, list[list]] | None:
    """``{"gather": [[layer, head(, kind)], ...], "aggregate": [...]}`` from a config's named heads
    (``kind`` filled in from ``kinds``' first entry when a ref has none), or None."""
    if not named:
        return None
    out = {}
    for role in ("gather", "aggregate"):
        out[role] = [[int(h[0]), int(h[1]), *([str(h[2])] if len(h) > 2 else ([kinds[0]] if kinds else []))]
                     for h in named[role]]
    return out


def role_heads(ga: pd.DataFrame, role: str, named: dict | None = None, heads_by: str = "role",
               threshold: float | None = None) -> list[list]:
    """The heads playing ``role``: the named ones if given, else the scan's top one read by ``heads_by``
    (:func:`scan_head`), or none."""
    if named:
        return [list(h) for h in named[role]]
    head = scan_head(ga, role, heads_by, threshold)
    return [head] if head else []


def mmlu_heads(scores: pd.DataFrame, layer: int, n: int) -> list[int]:
    """Table 1's heads of one critical layer: the ``n`` whose removal alone costs MMLU most.

    ``scores``: one row per (layer, head) with the MMLU accuracy when that head alone is ablated
    in the minimal model (rule ``critical_heads``); ties go to the lower head index."""
    sub = scores[scores.layer == layer].sort_values(["mmlu", "head"])
    if sub.empty:
        raise ValueError(f"no single-head MMLU scores for layer {layer}")
    return [int(h) for h in sub["head"].head(n)]


def keeping_plan(roles: dict[str, list[list]], condition: str) -> tuple[list[dict], dict[str, str]]:
    """Table 1: in the role heads' layers keep only the heads of the kept roles (or none).

    ``roles``: ``{"gather": [[layer, head(, kind)], ...], "aggregate": [...]}``. Every layer that
    holds a role head keeps exactly the heads of the roles ``condition`` keeps; other layers are
    untouched. Returns the ``keep_heads`` interventions and ``{"L16": "22", "L17": "none"}``."""
    if condition not in ROLES_KEPT:
        raise ValueError(f"condition {condition!r} is not one of {KEEPING_CONDITIONS}")
    layers: dict[tuple[int, str | None], list[int]] = {}
    for role, heads in roles.items():
        for h in heads:
            key = (int(h[0]), h[2] if len(h) > 2 else None)
            layers.setdefault(key, [])
            if role in ROLES_KEPT[condition]:
                layers[key].append(int(h[1]))
    specs, kept = [], {}
    for (layer, kind), heads in sorted(layers.items(), key=lambda kv: kv[0][0]):
        spec = {"layer": layer, "heads": sorted(set(heads))}
        if kind:
            spec["kind"] = kind
        specs.append(spec)
        kept[f"L{layer}"] = "/".join(map(str, sorted(set(heads)))) or "none"
    return [{"keep_heads": specs}], kept


NO_CRITICAL_LAYER = "n/a: no critical layer"


def no_critical_note(critical: dict) -> str:
    """Why Table 1's MMLU search has no layer, from the critical-layers json (rule critical_layers):
    none is critical, or the sample leaves layers open, where MMLU collapses without them but neither
    a critical layer nor none is shown; the knowledge margin named where no sample this size could
    show knowledge stay (its ``knowledge_floor``)."""
    undecided = critical.get("undecided_layers") or []
    if not undecided:
        return NO_CRITICAL_LAYER
    floor = below_floor(critical)
    return (f"n/a: critical layers not resolved (MMLU collapses without {', '.join(f'L{x}' for x in undecided)}; "
            "the sample shows neither that knowledge stays nor that it goes" + (f"; {floor}" if floor else "") + ")")


def mmlu_roles(scores: pd.DataFrame, layers: list[int], n: int, kind: str) -> dict[str, list[list]]:
    """Table 1's MMLU-search heads: in each of ``layers`` (the critical ones, :func:`gna.experiments.
    pruning.table1_layers`) the ``n`` heads whose removal alone costs MMLU most (:func:`mmlu_heads`).
    Two layers: the first is Gather's, the second Aggregate's, as the paper's L16 / L17. One layer:
    its heads are the only ones kept (under ``gather``; ``aggregate`` empty, no second role)."""
    if not 1 <= len(layers) <= 2:
        raise ValueError(f"Table 1 keeps heads in one or two critical layers, got {layers}")
    roles = {"gather": [], "aggregate": []}
    for role, layer in zip(("gather", "aggregate"), layers):
        roles[role] = [[int(layer), h, kind] for h in mmlu_heads(scores, layer, n)]
    return roles


def scan_roles(ga: pd.DataFrame, depth: int, heads_by: str = "role",
               threshold: float | None = None) -> tuple[dict[str, list[list]] | None, str]:
    """Table 1 on the KV scan's heads: its top Gather head and its top Aggregate head (``ga``: the
    scan's classified ranking, ``results/scan/<model>.ga.csv``), each kept alone in its layer of the
    minimal model (``depth`` layers); ``heads_by`` as Fig. 4's (the module docstring):
    ``role``, the top head classified in the role; ``pattern``, the top head whose pattern alone is the
    role's (scores against ``threshold``), whatever its KV drop. ``(roles, "")``, or ``(None, why)``
    where a role has no such head or a head lies outside the minimal model."""
    roles = {role: scan_head(ga, role, heads_by, threshold) for role in ("gather", "aggregate")}
    missing = [role for role, head in roles.items() if head is None]
    if missing:
        read = "has the pattern of" if heads_by == "pattern" else "is"
        return None, f"n/a: no head of the scan's classified top {read} {' or '.join(missing)}"
    outside = [f"L{h[0]}H{h[1]}" for h in roles.values() if h[0] >= depth]
    if outside:
        return None, f"n/a: {', '.join(outside)} outside the minimal model (layers 0..{depth - 1})"
    return {role: [head] for role, head in roles.items()}, ""


def one_layer_skip(roles: dict[str, list[list]], condition: str) -> str:
    """Why ``condition`` is not run: with one critical layer (no Aggregate heads) keeping 'gather only'
    is keeping 'both', and 'aggregate only' is 'neither'; "" where it is run."""
    if roles["aggregate"] or condition in ("both", "neither"):
        return ""
    return f"n/a: one critical layer (L{roles['gather'][0][0]}), its heads kept or not: 'both' and 'neither' only"


def keeping_roles(source: str, condition: str, depth: int, *, layers: list[int] | None = None,
                  scores: pd.DataFrame | None = None, per_layer: int = 1, kind: str | None = None,
                  named: dict | None = None, ga: pd.DataFrame | None = None,
                  none: str = NO_CRITICAL_LAYER, heads_by: str = "role",
                  threshold: float | None = None) -> tuple[dict | None, str]:
    """Table 1's heads for one (source, condition) of the minimal model (``depth`` layers), and why
    that condition is not run ("" where it is): ``named``, the config's heads; ``discovered``, the
    MMLU search in the critical ``layers`` (:func:`mmlu_roles`, ``scores`` its per-head MMLU), n/a
    where no layer is critical (``none``: why, :func:`no_critical_note`; never run on other layers);
    ``scan``, the KV scan's top Gather and Aggregate heads (:func:`scan_roles`, read by ``heads_by``
    and ``threshold``)."""
    if source == "named":
        return named_role_heads(named), ""
    if source == "scan":
        return scan_roles(ga, depth, heads_by, threshold)
    if source != "discovered":
        raise ValueError(f"Table 1's head source {source!r} is not one of named, discovered, scan")
    if not layers:
        return None, none
    roles = mmlu_roles(scores, layers, per_layer, kind)
    return roles, one_layer_skip(roles, condition)
