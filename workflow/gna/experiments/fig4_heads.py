"""Fig. 4's heads: the scan's top Gather head and its top Aggregate head, removed one at a time.

Two readings of "top Aggregate head" (``kv_pairs.heads_by``):

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

import pandas as pd

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
