"""G&A roles given only to heads whose drop is beyond noise.

The scan classifies its top heads by their token-mixing patterns (:mod:`gna.patterns.ga_roles`); a
pattern says what a head does, not that retrieval needs it. A role is kept only where the head's single
ablation drop is beyond noise on the probe (:func:`gna.questions.null.beyond_noise`). The scan's ranking
holds each exactly ablated head's paired counts (``gna.scan.ranking.CHANGED``); a head is ablated again
here only where the ranking lacks them (a ranking written before it kept them, or a head only estimated).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from torch import nn

from ..scan.ranking import CHANGED
from .head_sets import ablate_sets
from .null import beyond_noise

KEY = ["layer", "head", "kind"]


def counts_from_ranking(ga: pd.DataFrame, ranking: pd.DataFrame | None) -> pd.DataFrame | None:
    """``ga``'s heads' prompts turned wrong and turned right by their ablation, as ``ranking``
    holds them (columns ``CHANGED``, in ``ga``'s order), or None where it lacks them for any head."""
    if ranking is None or not set(CHANGED) <= set(ranking.columns):
        return None
    got = ga[KEY].merge(ranking[KEY + CHANGED], on=KEY, how="left")
    if len(got) != len(ga) or got[CHANGED].isna().any().any():
        return None
    return got[CHANGED].astype(int)


def roles_beyond_noise(model: nn.Module, encoded, ga: pd.DataFrame, n_heads: int, baseline=None,
                       ranking: pd.DataFrame | None = None, **batching) -> pd.DataFrame:
    """``ga`` (classified heads, columns layer, head, kind, role) with a role kept only where the head's
    single ablation drop is beyond noise on ``encoded`` (exact one-sided McNemar, 5% familywise over
    the ``n_heads`` heads ranked: :func:`gna.questions.null.beyond_noise`); the others' role is ``-``.
    Adds ``discordant`` (prompts the ablation changes) and ``beyond_noise``. A pattern says what a
    head does; without a drop beyond noise there is nothing it does for retrieval to name.
    ``ranking``: the scan's ranking of ``encoded``; where it holds every head's ``CHANGED`` counts the
    test reads them, else each head is ablated again (``batching``: batch_size, max_rows)."""
    if ga.empty:
        return ga.assign(discordant=pd.Series(dtype=int), beyond_noise=pd.Series(dtype=bool))
    counts = counts_from_ranking(ga, ranking)
    if counts is not None:
        worse, better = counts[CHANGED[0]].to_numpy(), counts[CHANGED[1]].to_numpy()
        discordant, drops = worse + better, (worse - better) / len(encoded)
    else:
        heads = [(int(r.layer), int(r.head), str(r.kind)) for r in ga.itertuples()]
        got = ablate_sets(model, encoded, [[h] for h in heads], baseline=baseline, **batching)
        discordant, drops = got.discordant.to_numpy(), (got.baseline_accuracy - got.accuracy).to_numpy()
    ok = beyond_noise(drops, discordant, len(encoded), tested=n_heads)
    out = ga.assign(discordant=np.asarray(discordant).astype(int), beyond_noise=ok)
    return out.assign(role=out.role.where(out.beyond_noise, "-"))
