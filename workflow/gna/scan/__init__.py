"""The head scan: which heads a model's retrieval needs, ranked.

- :mod:`.methods`: :func:`scan`, the entry point, runs the method the config names.
- :mod:`.exact`: ablate each head alone and measure the KV probe (the paper's ranking), and the
  naive loop kept as its reference.
- :mod:`.attribution`: the attribution-patching (AtP) estimate of every head's ablation.
- :mod:`.attribution_ranking`: the ``atp`` and ``atp+exact`` methods built on that estimate, with
  the false-negative guard.
- :mod:`.guard_bounds`: the guard's statistics, and its cost and reach, said before it works.
- :mod:`.guard_result`: :class:`ScanGuard`, what a scan's guard found, and its one-line summary.
- :mod:`.ranking`: what they share: the mixers scanned, the ranking's columns, ties, top-k.
- :mod:`.repeated_forwards`: the scan's batching (copies of a batch from a layer on), also how the
  open questions score head sets and patched paths; the clean forwards kept across passes.

Imports run one way: ranking, repeated_forwards <- exact; attribution, guard_bounds, guard_result <-
attribution_ranking <- methods.
May import: ``errors``, ``models``, ``interventions``, ``probes``, ``resume`` (a stopped job's finished
chunks); never the report, the questions, the experiments or the job machinery (they import the scan).
"""
from .exact import naive_scan_heads, scan_heads
from .guard_result import GuardHead, ScanGuard
from .methods import METHODS, scan
from .ranking import (COLUMNS, FP32_RESOLUTION, LOGPROB_RESOLUTION, logprob_resolution, rank_heads, select_mixers,
                      tie_keys, top_k)


__all__ = ["COLUMNS", "FP32_RESOLUTION", "GuardHead", "LOGPROB_RESOLUTION", "METHODS", "ScanGuard",
           "logprob_resolution", "naive_scan_heads", "rank_heads", "scan", "scan_heads", "select_mixers", "tie_keys",
           "top_k"]
