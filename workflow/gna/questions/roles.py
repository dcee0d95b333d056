"""G&A roles given only to heads whose drop is beyond noise.

The scan classifies its top heads by their token-mixing patterns (:mod:`gna.patterns.ga_roles`); a
pattern says what a head does, not that retrieval needs it. A role is kept only where the head's single
ablation drop is beyond noise on the probe (:func:`gna.questions.null.beyond_noise`).
"""
from __future__ import annotations

import pandas as pd
from torch import nn

from .head_sets import ablate_sets
from .null import beyond_noise


def roles_beyond_noise(model: nn.Module, encoded, ga: pd.DataFrame, n_heads: int, baseline=None,
                       **batching) -> pd.DataFrame:
    """``ga`` (classified heads, columns layer, head, kind, role) with a role kept only where the head's
    single ablation drop is beyond noise on ``encoded`` (exact one-sided McNemar, 5% familywise over
    the ``n_heads`` heads ranked: :func:`gna.questions.null.beyond_noise`); the others' role is ``-``.
    Adds ``discordant`` (prompts the ablation changes) and ``beyond_noise``. A pattern says what a
    head does; without a drop beyond noise there is nothing it does for retrieval to name."""
    if ga.empty:
        return ga.assign(discordant=pd.Series(dtype=int), beyond_noise=pd.Series(dtype=bool))
    heads = [(int(r.layer), int(r.head), str(r.kind)) for r in ga.itertuples()]
    got = ablate_sets(model, encoded, [[h] for h in heads], baseline=baseline, **batching)
    ok = beyond_noise(got.baseline_accuracy - got.accuracy, got.discordant, len(encoded), tested=n_heads)
    out = ga.assign(discordant=got.discordant.to_numpy(), beyond_noise=ok)
    return out.assign(role=out.role.where(out.beyond_noise, "-"))
