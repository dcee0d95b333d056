"""The open questions' jobs in the resource plan (``snakemake plan``), costed as the scan is: a set of
heads ablated together, a path patched, costs what one head of the exact scan costs."""
from __future__ import annotations

import math

from . import estimate as E
from .estimate import Estimate

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


def _n_heads(s, model: str) -> int:
    return sum(h for (_, _, h) in s.info(model).heads_by_layer)


def head_sets(s, wc: dict, exp: dict) -> Estimate:
    """Pairs of the top heads, every head beyond noise ablated again for the pool, every set of the
    pool by size (the minimal-set search)."""
    model = wc["model"]
    n_heads = _n_heads(s, model)
    top, size = int(exp["top"]), int(exp["max_size"])
    beyond = exp["candidates"] == "beyond_noise"
    pool = min(n_heads, POOL_BEYOND_NOISE if beyond else int(exp["candidates"]))
    sets = top + math.comb(top, 2) + (n_heads if beyond else 0) + sum(
        min(math.comb(pool, k), 20000) + 1 for k in range(1, min(size, SEARCH_SIZES) + 1))
    share = min(1.0, (exp.get("n_examples") or 1e18) / s.config["kv_probe"]["n_examples"])
    secs, peak, info = _scan(s, model, sets / n_heads * share)
    return E.loaded(s.hw, info, secs, peak)


def format_scans(s, wc: dict, exp: dict) -> Estimate:
    """The scan under each probe format (the listed options add n_options lines to the prompt)."""
    n = exp.get("n_examples") or s.config["kv_probe"]["n_examples"]
    secs, peak, info = _scan(s, wc["model"], len(exp["formats"]) * n / s.config["kv_probe"]["n_examples"], 1.3)
    return E.loaded(s.hw, info, secs, peak)


def one_scan(s, wc: dict) -> Estimate:
    """One exact scan on another seed's probe."""
    secs, peak, info = _scan(s, wc["model"])
    return E.loaded(s.hw, info, secs, peak)


def seed_scans(s, wc: dict, exp: dict) -> Estimate:
    """Every head ablated again on every seed's probe, per prompt."""
    secs, peak, info = _scan(s, wc["model"], len(exp["seeds"]))
    return E.loaded(s.hw, info, secs, peak)


def path_patching(s, wc: dict, exp: dict) -> Estimate:
    """Every path through every spec, each spec's ablated forwards, the paths to the logits, the whole heads."""
    from ..questions.names import SPECS

    g, a = int(exp["n_gather"]), int(exp["n_aggregate"])
    secs, peak, info = _scan(s, wc["model"], (g * a * len(SPECS) + g * (len(SPECS) + 1) + g + a) / _n_heads(s, wc["model"]))
    return E.loaded(s.hw, info, secs, peak)
