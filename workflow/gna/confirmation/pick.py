"""The pick: from the screen's answers only, the conditions each claim is judged on, their parts and the
fresh items each needs, by the rule the config writes (``confirmation``) before anything runs.

The rule, claim by claim, in the paper's order (the budget is spent in it):

- **Fig. 2**: the full model, the minimal depth the screen found and the depth one below it (the fall),
  read off one forward; parts: MMLU's drop to the minimal depth stays within ``tolerance``; its drop to
  one layer fewer exceeds ``collapse`` of the full model's above-chance MMLU.
- **Fig. 3**: at most ``fig3_layers`` layers removed one at a time from the minimal model: those whose
  screen MMLU drop reaches the collapse line (by its estimate: the screen collapses it), largest first,
  among those whose knowledge the screen does not show lost (the interval's lower end under the knowledge
  line: the protocol's "a layer whose removal breaks everything is not critical"); where none qualifies,
  ``fig3_fallback: largest`` takes the largest MMLU drops all the same (the screen's best case, whose
  knowledge the fresh items then decide), ``none`` picks nothing. Parts per layer: MMLU's drop beyond the
  collapse line (Bonferroni over the layers picked from), knowledge's drop within the knowledge line.
- **Table 1**: the minimal model and the four head-keeping conditions the screen ran; parts: both kept
  within ``tolerance`` of the minimal model, each other condition's fall from both kept beyond the
  collapse line, each condition's knowledge within the knowledge line (every condition must hold: an
  intersection-union test, each at 95%).
- **Fig. 4**: the full model and the model without the Aggregate head at the smallest and largest pair
  counts, on fresh KV prompts; part: the drop's growth beyond 0.05.
- **top-k**: k = 0, the largest k ranked and its random draws; parts: retrieval's fall (its tasks pooled)
  beyond ``tolerance``, knowledge's within the knowledge line.

The knowledge line (``knowledge_share``) is a share of the reference's above-chance retrieval (MMLU, or
top-k's retrieval tasks): knowledge may move at most that share of what the claim's collapse moves. The
screen's own cut-off (a tenth of the above-chance knowledge, ~0.009 on Qwen) needs ~17,600 items a
condition; this one (0.2 of Qwen's 0.26 above-chance MMLU: ~0.05) needs hundreds (docs/reproduction-notes.md).
"""
from __future__ import annotations

from dataclasses import asdict

from . import claims, sizing
from .parts import Condition, PartSpec, needed

def size_part(p: PartSpec, st: dict, cap: int) -> None:
    """The part's n from its screen comparison (see :mod:`.sizing`), within ``cap``."""
    s = p.screen
    if p.line_rule == "growth":   # a difference of two paired drops on different prompts
        p.n_needed = sizing.growth_n(st["growth"], [(x["discordance"], x["drop"]) for x in (s["high"], s["low"])])
    else:
        p.n_needed = sizing.part_n(needed(p, s.get("ref", {}), st), s["discordance"], s["first"], m=p.m)
    p.n, p.capped = sizing.capped(p.n_needed, cap)


def pick(screen: dict, rule: dict, st: dict) -> dict:
    """The confirmation plan of one model, claim by claim in ``rule["claims"]``' order (the paper's): each
    claim's conditions (scored together in one job, each on the most items any of the claim's parts asks
    per role) and parts (the n each needs and gets), the budget (``rule["cpu_core_hours"]`` at
    ``rule["seconds_per_item"]``) spent in that order: a claim that would pass what is left gets it,
    its parts shrunk in proportion and marked capped (their verdict then says the n they needed)."""
    left, rates, out = rule["cpu_core_hours"] * 3600.0, dict(rule["seconds_per_item"]), {}
    for claim in rule["claims"]:
        conds, parts = getattr(claims, claim)(screen, rule, st)
        if not parts:
            continue
        for p in parts:
            size_part(p, st, rule["caps"][_cap_role(p.role)])
        by_id = {c.id: c for c in conds}
        _assign_items(by_id, parts)
        cost = _cost(by_id, rates)
        if cost > left:
            _shrink(parts, max(left, 0.0) / cost)
            _assign_items(by_id, parts)
            cost = _cost(by_id, rates)
        left -= cost
        out[claim] = {"conditions": [asdict(c) for c in by_id.values() if c.items],
                      "parts": [asdict(p) for p in parts], "cpu_core_hours": round(cost / 3600, 3)}
    return {"claims": out, "cpu_core_hours": round(sum(c["cpu_core_hours"] for c in out.values()), 3),
            "budget": rule["cpu_core_hours"]}


def _cap_role(role: str) -> str:
    return "kv" if role.startswith("kv") else role


def _assign_items(conditions: dict[str, Condition], parts: list[PartSpec]) -> None:
    """Each condition of a claim scores, per role any of its parts compares it on, the most items any part
    of the claim asks on that role (the claim's conditions run together, sharing their forwards)."""
    most: dict[str, int] = {}
    for p in parts:
        for role in {p.role, *([p.pair[2]] if p.pair else [])}:
            most[role] = max(most.get(role, 0), p.n)
    for c in conditions.values():
        c.items = {}
    for p in parts:
        sides = [(p.first, p.role), (p.second, p.role)] + [(d, p.role) for d in p.draws]
        if p.pair:
            sides += [(p.pair[0], p.pair[2]), (p.pair[1], p.pair[2])]
        for cid, role in sides:
            if most[role] > 0:
                conditions[cid].items[role] = most[role]


def _cost(conditions: dict[str, Condition], rates: dict) -> float:
    total = 0.0
    for c in conditions.values():
        per = {role: rates[_cap_role(role)] * (int(role[2:]) if role.startswith("kv") else 1) for role in c.items}
        total += sizing.condition_seconds(c.items, per, c.share)
    return total


def _shrink(parts: list[PartSpec], ratio: float) -> None:
    for p in parts:
        n = max(int(p.n * ratio), 0)
        p.capped = p.capped or n < p.n
        p.n = n
