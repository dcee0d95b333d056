"""The open questions' jobs in the resource plan (``snakemake plan``), costed as the scan is: a set of
heads ablated together, a path patched, costs what one head of the exact scan costs."""
from __future__ import annotations

import math

from . import estimate as E
from .estimate import GB, Estimate

RULES = ("head_pairs", "format_scan", "ranking_seed_scan", "ranking_seeds", "ga_paths")
POOL_BEYOND_NOISE = 20
"""The plan's guess of a paper-scale model's heads beyond noise (``head_pairs.candidates: beyond_noise``)."""
SEARCH_SIZES = 3
"""The plan costs the minimal-set search up to this size (where it stopped on every model measured)."""


def _scan(s, model: str, ablations_per_head: float = 1.0, tokens_scale: float = 1.0) -> tuple[float, float, object]:
    """(seconds, peak bytes, info) of the exact scan of ``model`` on the study's probe, times ``ablations_per_head``."""
    cfg, info = s.config, s.info(model)
    sc = cfg["scan"]
    T = int(E.probe_tokens(int(sc["n_pairs"])) * tokens_scale)
    secs, peak = E.head_scan(s.hw, info, int(cfg["kv_probe"]["n_examples"]), int(sc["n_pairs"]),
                             int(sc["batch_size"]), int(sc["max_rows"]), classify_top=0, classify_examples=0,
                             tokens=T)
    return secs * ablations_per_head, peak, info


def estimate(s, rule: str, wc: dict) -> Estimate:
    """The estimate of one job of ``rule`` (one of :data:`RULES`)."""
    ex, model = s.exps, wc["model"]
    n_heads = sum(h for (_, _, h) in s.info(model).heads_by_layer)
    if rule == "head_pairs":
        p = ex["head_pairs"]
        top, size = int(p["top"]), int(p["max_size"])
        beyond = p["candidates"] == "beyond_noise"
        pool = min(n_heads, POOL_BEYOND_NOISE if beyond else int(p["candidates"]))
        # pairs; every head with a positive drop ablated again for the pool; every set of the pool by size
        sets = top + math.comb(top, 2) + (n_heads if beyond else 0) + sum(
            min(math.comb(pool, k), 20000) + 1 for k in range(1, min(size, SEARCH_SIZES) + 1))
        share = min(1.0, (p.get("n_examples") or 1e18) / s.config["kv_probe"]["n_examples"])
        secs, peak, info = _scan(s, model, sets / n_heads * share)
    elif rule == "format_scan":
        p = ex["probe_formats"]
        n = p.get("n_examples") or s.config["kv_probe"]["n_examples"]
        # the listed options add n_options lines to the prompt
        secs, peak, info = _scan(s, model, len(p["formats"]) * n / s.config["kv_probe"]["n_examples"], 1.3)
    elif rule == "ranking_seed_scan":
        secs, peak, info = _scan(s, model)
    elif rule == "ranking_seeds":   # every head ablated again on every seed's probe, per prompt
        secs, peak, info = _scan(s, model, len(ex["ranking_seeds"]["seeds"]))
    elif rule == "ga_paths":
        p = ex["ga_paths"]
        from ..questions.names import SPECS

        g, a = int(p["n_gather"]), int(p["n_aggregate"])
        # every path through every spec, each spec's ablated forwards, the paths to the logits, the whole heads
        secs, peak, info = _scan(s, model, (g * a * len(SPECS) + g * (len(SPECS) + 1) + g + a) / n_heads)
    else:
        raise ValueError(f"no estimate for {rule!r}")
    return Estimate(gpu_gb=peak / GB, host_gb=E.host_gb(s.hw, info), hours=(secs + E.load_seconds(s.hw, info)) / 3600)
