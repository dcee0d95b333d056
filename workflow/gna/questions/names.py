"""Names of heads and head sets in the open questions' tables (``L4H2+L5H2``) and the paths the
G-to-A matrix patches: torch-free, so the figures and the plan need no model code."""
from __future__ import annotations

Head = tuple  # (layer, head, kind)


def set_name(heads) -> str:
    """``L4H2+L5H2`` (attention) / ``L1H3m`` (another kind: its first letter) for a set of heads."""
    return "+".join(f"L{l}H{h}" + ("" if k == "attention" else k[0]) for l, h, k in heads) or "none"


SPECS = (("direct", "kv", "all"), ("all", "kv", "all"), ("all", "q", "all"), ("all", "k", "all"),
         ("all", "v", "all"), ("all", "kv", "values"), ("all", "k", "values"), ("all", "q", "final"))
"""(via, components, positions) of every path the G-to-A matrix patches (:mod:`.ga_paths`): the
sender's own write into the receiver's K/V; every path into its query, key, value, K/V together;
K/V and key at the value tokens; the query at the positions the answer is read at."""
