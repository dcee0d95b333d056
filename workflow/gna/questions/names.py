"""Names of heads and head sets in the open questions' tables (``L4H2+L5H2``): torch-free, so the
figures that label heads need no model code."""
from __future__ import annotations

Head = tuple  # (layer, head, kind)


def set_name(heads) -> str:
    """``L4H2+L5H2`` (attention) / ``L1H3m`` (another kind: its first letter) for a set of heads."""
    return "+".join(f"L{l}H{h}" + ("" if k == "attention" else k[0]) for l, h, k in heads) or "none"
