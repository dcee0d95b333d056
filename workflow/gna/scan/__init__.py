"""The head scan: which heads a model's retrieval needs, ranked.

- :mod:`.exact`: ablate each head alone and measure the KV probe (the paper's ranking), the
  naive reference loop, and the :func:`scan` entry point that picks a method.
- :mod:`.attribution`: the attribution-patching (AtP) estimate of every head's ablation.
- :mod:`.attribution_ranking`: the ``atp`` and ``atp+exact`` methods built on it, with the
  false-negative guard.

May import: ``errors``, ``models``, ``interventions``, ``probes``; never ``report``, ``questions``,
``experiments`` or the job machinery (they import the scan).
"""
from .exact import (COLUMNS, FP32_RESOLUTION, LOGPROB_RESOLUTION, METHODS, logprob_resolution, naive_scan_heads,
                    rank_heads, scan, scan_heads, tie_keys, top_k)

__all__ = ["COLUMNS", "FP32_RESOLUTION", "LOGPROB_RESOLUTION", "METHODS", "logprob_resolution", "naive_scan_heads",
           "rank_heads", "scan", "scan_heads", "tie_keys", "top_k"]

from .exact import _select  # noqa: E402  the name the benchmarks import; select_mixers from the next release
