"""How far a fast ranking (``atp+exact``) finds the exact scan's top heads on the same probe: per k,
the share of the exact top k in the fast top k, and whether the fast scan ablated each of them
exactly (so that its rank there is the exact one) or left it to the estimate."""
from __future__ import annotations

import pandas as pd

KEY = ["layer", "head", "kind"]


def agreement(exact: pd.DataFrame, fast: pd.DataFrame, ks=(1, 3, 5, 10)) -> pd.DataFrame:
    """One row per k: ``recall`` (exact top k found in the fast top k), ``verified`` (exact top k that
    the fast scan ablated exactly), the exact top k's lowest drop and the fast scan's k-th drop."""
    if set(zip(*[exact[c] for c in KEY])) != set(zip(*[fast[c] for c in KEY])):
        raise ValueError("the two rankings do not cover the same heads: not the same model or probe")
    exact, fast = exact.sort_values("rank"), fast.sort_values("rank")
    verified = {tuple(r) for r in fast[fast["exact"].astype(bool)][KEY].itertuples(index=False)} \
        if "exact" in fast else set()
    rows = []
    for k in ks:
        if k > len(exact):
            break
        top = [tuple(r) for r in exact.head(k)[KEY].itertuples(index=False)]
        found = {tuple(r) for r in fast.head(k)[KEY].itertuples(index=False)}
        rows.append({"k": k, "recall": sum(h in found for h in top) / k,
                     "verified": sum(h in verified for h in top) / k,
                     "exact_kth_drop": float(exact["drop"].iloc[k - 1]),
                     "fast_kth_drop": float(fast["drop"].iloc[k - 1]) if pd.notna(fast["drop"].iloc[k - 1]) else float("nan")})
    return pd.DataFrame(rows)
