"""How far a fast ranking (``atp+exact``) finds the exact scan's top heads on the same probe: per k,
the share of the exact top k in the fast top k, and whether the fast scan ablated each of them
exactly (so that its rank there is the exact one) or left it to the estimate; and how many of the
exact top k could be beyond noise at all: agreement on heads whose drops are noise says nothing of the
fast scan."""
from __future__ import annotations

import pandas as pd

from .guard_bounds import FAMILYWISE_ALPHA, mcnemar_p

KEY = ["layer", "head", "kind"]


def agreement(exact: pd.DataFrame, fast: pd.DataFrame, ks=(1, 3, 5, 10)) -> pd.DataFrame:
    """One row per k: ``recall`` (exact top k found in the fast top k), ``verified`` (exact top k that
    the fast scan ablated exactly), ``beyond_noise_at_best`` (exact top k that :func:`could_be_beyond_noise`,
    where the exact ranking says on how many prompts, ``n_examples``), the exact top k's lowest drop and
    the fast scan's k-th drop."""
    if set(zip(*[exact[c] for c in KEY])) != set(zip(*[fast[c] for c in KEY])):
        raise ValueError("the two rankings do not cover the same heads: not the same model or probe")
    exact, fast = exact.sort_values("rank"), fast.sort_values("rank")
    verified = {tuple(r) for r in fast[fast["exact"].astype(bool)][KEY].itertuples(index=False)} \
        if "exact" in fast else set()
    n = int(exact["n_examples"].iloc[0]) if "n_examples" in exact else None
    possible = [could_be_beyond_noise(d, n, len(exact)) for d in exact["drop"]] if n else None
    rows = []
    for k in ks:
        if k > len(exact):
            break
        top = [tuple(r) for r in exact.head(k)[KEY].itertuples(index=False)]
        found = {tuple(r) for r in fast.head(k)[KEY].itertuples(index=False)}
        rows.append({"k": k, "recall": sum(h in found for h in top) / k,
                     "verified": sum(h in verified for h in top) / k,
                     "beyond_noise_at_best": sum(possible[:k]) if possible else float("nan"),
                     "exact_kth_drop": float(exact["drop"].iloc[k - 1]),
                     "fast_kth_drop": float(fast["drop"].iloc[k - 1]) if pd.notna(fast["drop"].iloc[k - 1]) else float("nan")})
    return pd.DataFrame(rows)


def could_be_beyond_noise(drop: float, n: int, tested: int, alpha: float = FAMILYWISE_ALPHA) -> bool:
    """Could an accuracy drop on ``n`` prompts be beyond noise (one-sided exact McNemar, ``alpha``
    familywise over ``tested`` heads, as :func:`gna.questions.null.beyond_noise`) with the most
    favourable counts: every prompt the ablation changed turned wrong (``drop * n`` discordant, the
    smallest p that drop can have)? False rules the head out from its drop alone, where the ranking
    holds no discordant counts (the exact scan's). A drop not measured (NaN) is not counted."""
    if pd.isna(drop):
        return False
    lost = round(float(drop) * n)
    return lost > 0 and mcnemar_p(lost / n, lost, n) < alpha / tested
