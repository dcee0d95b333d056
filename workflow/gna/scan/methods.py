"""The scan's entry point: one call, the method named by the config (``scan.method``).

``exact`` is :func:`gna.scan.exact.scan_heads` (the paper's ranking); ``atp`` and ``atp+exact``
are :func:`gna.scan.attribution_ranking.attribution_ranking`. Every method's ranking carries, per head
ablated exactly, the prompts its ablation turns wrong and right (``gna.scan.ranking.CHANGED``): the
noise test of the top heads' roles reads them there instead of ablating them again.
"""
from __future__ import annotations

import pandas as pd
from torch import nn

from ..errors import ConfigError
from ..probes.encoded import EncodedProbe
from ..probes.scoring import ProbeScore
from .attribution_ranking import attribution_ranking
from .exact import scan_heads
from .guard_result import ScanGuard


METHODS = ("exact", "atp", "atp+exact")


def scan(model: nn.Module, encoded: EncodedProbe, method: str = "exact", batch_size: int = 32, max_rows: int = 256,
         kinds=None, layers=None, model_name: str = "", progress: bool = True, baseline: ProbeScore | None = None,
         **atp) -> tuple[pd.DataFrame, ScanGuard]:
    """``(ranking, guard)`` by ``method``: ``exact`` is :func:`scan_heads` (the paper's ranking);
    ``atp`` and ``atp+exact`` are :func:`gna.scan.attribution_ranking.attribution_ranking`, which takes
    ``atp`` (candidates, guard_sample, guard_k, guard_level, atp_score, graddrop, ig_steps, seed; ``exact`` ignores
    them). ``guard``: a :class:`gna.scan.guard_result.ScanGuard`, how far the ranking was verified."""
    if method not in METHODS:
        raise ConfigError(f"scan.method = {method!r}: expected one of {', '.join(METHODS)}")
    common = dict(batch_size=batch_size, max_rows=max_rows, kinds=kinds, layers=layers, model_name=model_name,
                  progress=progress, baseline=baseline)
    if method == "exact":
        ranking = scan_heads(model, encoded, discordant=True, **common).drop(columns="discordant")
        return ranking, ScanGuard(method="exact", n_heads=len(ranking))
    return attribution_ranking(model, encoded, method, **atp, **common)
