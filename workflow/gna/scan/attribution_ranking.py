"""The scan methods built on the attribution estimate: ``atp`` and ``atp+exact``.

``atp``: every head ranked by the magnitude of its AtP estimate (``atp_magnitude``, the mean of each
example's |estimate|; :func:`gna.scan.attribution.atp_scan`); no ablation runs. A magnitude, as AtP* ranks:
zeroing a head is no small step, and on the trained micro models the estimate's sign is wrong for
some of the heads that matter most (micro-llama's top head, exact drop 0.69, has mean estimate -3.6).
``atp+exact``: the top ``candidates`` heads by that magnitude are ablated exactly
(:func:`gna.scan.scan_heads` on those heads only), and so is a seeded uniform sample of
``guard_sample`` other heads: the false-negative guard. The ranking's verified rows (``exact`` True)
carry the exact scan's numbers and are ranked as it ranks them; the other heads follow, ranked by
the estimate, with no accuracy (NaN). The guard counts the sampled heads whose exact numbers beat
the ``guard_k``-th candidate's, and turns that into a one-sided 95% Clopper-Pearson upper bound on
how many unverified heads beat it (the sample is uniform, so the count is binomial; AtP*'s own
diagnostic weights its sample by the estimate, which this uniform one does not need).
"""
from __future__ import annotations

import logging
from typing import Callable

import pandas as pd
import torch
from torch import nn

from .attribution import atp_scan
from ..errors import ConfigError
from ..models import adapter_for
from ..probes.encoded import EncodedProbe
from ..probes.scoring import ProbeScore, iter_batches, score
from .exact import scan_heads
from .guard_bounds import FAMILYWISE_ALPHA, draws_to_level, guard_plan, mcnemar_p, plan_line, upper_bound
from .guard_result import GuardHead, ScanGuard
from .ranking import CHANGED, COLUMNS, logprob_resolution, select_mixers, tie_keys
from .repeated_forwards import ResidualCache

log = logging.getLogger(__name__)

EXTRA = ["atp_drop", "atp_magnitude", "exact"]
KEY = ["layer", "head", "kind"]


def _rerank(df: pd.DataFrame, resolution: float) -> pd.DataFrame:
    """Exact rows of several scans as one ranking, by gna.scan.ranking.rank_heads's rule."""
    df = df.copy()
    df["_d"], df["_l"] = tie_keys(df["drop"], df["logprob_drop"], resolution)
    df = df.sort_values(["_d", "_l", "layer", "kind", "head"], ascending=[False, False, True, True, True])
    df["rank"] = range(1, len(df) + 1)
    return df.drop(columns=["_d", "_l"]).reset_index(drop=True)


def _beats(a, b, resolution: float) -> bool:
    """Does exact row ``a`` rank above exact row ``b``, by the ranking's own rule (gna.scan.ranking.tie_keys)?"""
    return tie_keys(a["drop"], a["logprob_drop"], resolution) > tie_keys(b["drop"], b["logprob_drop"], resolution)


def by_magnitude(est: pd.DataFrame) -> pd.DataFrame:
    """Heads by ``atp_magnitude``, largest first (ties by position)."""
    return est.sort_values(["atp_magnitude", "layer", "kind", "head"], ascending=[False, True, True, True])


def _atp_only_rows(est: pd.DataFrame, base_acc: float, encoded: EncodedProbe, model_name: str,
                   start_rank: int) -> pd.DataFrame:
    """Heads without exact numbers, ranked by the estimate's magnitude from ``start_rank`` on."""
    df = by_magnitude(est).copy()
    df["model"], df["baseline_accuracy"], df["n_examples"], df["exact"] = model_name, base_acc, len(encoded), False
    for c in ("accuracy", "drop", "answer_logprob", "logprob_drop"):
        df[c] = float("nan")
    for c in CHANGED:
        df[c] = pd.array([pd.NA] * len(df), dtype="Int64")
    df["rank"] = range(start_rank, start_rank + len(df))
    return df[COLUMNS + CHANGED + EXTRA]


def _check_exact_settings(candidates, guard_sample, guard_k) -> None:
    """``atp+exact``'s settings, checked before the estimate's passes run."""
    if not isinstance(candidates, int) or candidates < 1:
        raise ConfigError(f"scan.candidates = {candidates!r}: must be a positive number of heads")
    if not isinstance(guard_sample, int) or guard_sample < 0:
        raise ConfigError(f"scan.guard_sample = {guard_sample!r}: must be 0 or more heads")
    if not isinstance(guard_k, int) or guard_k < 1:
        raise ConfigError(f"scan.guard_k = {guard_k!r}: must be a candidate's rank, 1 or more")


def _planned_guard(model, encoded, mixers, baseline: ProbeScore, batch_size: int, candidates: int,
                   guard_sample: int, guard_k: int, guard_level, say) -> dict:
    """The guard's plan (:func:`gna.scan.guard_bounds.guard_plan`), its cost and each reason the probe
    cannot support the level said before any work."""
    rows = sum(b.input_ids.shape[0] for b in iter_batches(encoded, batch_size))
    plan = guard_plan([m.layer for m in mixers for _ in range(m.n_heads)], len(adapter_for(model).layers()),
                      candidates, guard_sample, guard_k, guard_level, len(encoded), baseline.accuracy,
                      1 / encoded.n_choices)
    say(plan_line(plan, guard_k, guard_level, rows))
    for reason in plan["unsupported"]:
        say(f"the probe cannot support the guard's level {guard_level:.2f}: {reason}; the guard keeps its "
            f"first {plan['heads_max'] - plan['candidates']} draws and states no bound at that level")
    return plan


class _ExactPasses:
    """The exact ablations of ``atp+exact``: the non-candidates ``rest`` in one seeded draw order, and
    every pass through one :class:`ResidualCache` (``common``: :func:`scan_heads`' settings)."""

    def __init__(self, model, encoded: EncodedProbe, rest: pd.DataFrame, seed: int, common: dict,
                 resolution: float):
        self.model, self.encoded, self.rest, self.common, self.resolution = model, encoded, rest, common, resolution
        self.draw_order = torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed)).tolist()

    def rows(self, heads: pd.DataFrame) -> pd.DataFrame:
        verify = [(int(l), int(h), str(k)) for l, h, k in heads[KEY].itertuples(index=False)]
        return scan_heads(self.model, self.encoded, heads=verify, **self.common)

    def sample(self, n: int) -> pd.DataFrame:
        """The first ``n`` draws, in the ranking's order."""
        return self.rest.iloc[sorted(self.draw_order[:n])]

    def hits(self, exact: pd.DataFrame, bar, n: int) -> list:
        """The exact rows of the first ``n`` draws that rank above ``bar`` (none without a bar)."""
        rows = exact.merge(self.sample(n)[KEY], on=KEY)
        return [] if bar is None else [r for _, r in rows.iterrows() if _beats(r, bar, self.resolution)]


def _bar_is_noise(bar, bar_p: float, k: int, n_prompts: int, n_heads: int) -> str | None:
    """Why the guard's bar (the ``k``-th candidate) cannot carry a level: its drop not beyond noise
    (McNemar, 5% familywise over the heads); None where it can."""
    if bar_p < FAMILYWISE_ALPHA / n_heads and bar["drop"] > 0:
        return None
    return (f"its bar, candidate #{k} (L{int(bar.layer)}H{int(bar['head'])} {bar.kind}, drop "
            f"{float(bar['drop']):.3f}, {int(bar['discordant'])} of {n_prompts} prompts changed, "
            f"McNemar p {bar_p:.2g}), is not beyond noise (p < {FAMILYWISE_ALPHA / n_heads:.2g}, 5% "
            f"familywise over {n_heads} heads): heads that do nothing beat it by chance")


def _draw_to_level(passes: _ExactPasses, exact: pd.DataFrame, hits: list, n_drawn: int, bar, k: int,
                   guard_level: float):
    """The sequential guard: more draws, ablated, until the bound on the non-candidates that beat ``bar``
    is at most ``guard_level`` or no number of draws can get it there. -> (exact, n_drawn, hits, why it
    stopped short or None)."""
    rest = passes.rest
    while upper_bound(len(hits), n_drawn, len(rest)) / len(rest) > guard_level:
        # enough further draws to meet the level if none of them beats the bar
        need = draws_to_level(len(hits), len(rest), guard_level)
        if need is None:
            return exact, n_drawn, hits, (f"{len(hits)} of its {n_drawn} draws beat candidate #{k}: even with no "
                                          f"hit among the other {len(rest) - n_drawn} heads its bound stays above "
                                          "the level")
        more = rest.iloc[sorted(passes.draw_order[n_drawn:max(need, n_drawn + 1)])]
        exact = _rerank(pd.concat([exact, passes.rows(more)], ignore_index=True), passes.resolution)
        n_drawn = max(need, n_drawn + 1)
        hits = passes.hits(exact, bar, n_drawn)
    return exact, n_drawn, hits, None


def _guard_result(estimate: dict, plan: dict, n_cand: int, sampled: int, n_rest: int, unverified: int, k: int, bar,
                  bar_p, hits: list, guard_level, stopped, clean_forwards: int) -> ScanGuard:
    bound_share = upper_bound(len(hits), sampled, n_rest) / max(1, n_rest)
    return ScanGuard(
        **estimate, candidates=n_cand, sampled=sampled, guard_k=k,
        kth_candidate=None if bar is None else GuardHead(int(bar.layer), int(bar["head"]), str(bar.kind),
                                                         float(bar["drop"])),
        beating_heads=tuple(GuardHead(int(r.layer), int(r["head"]), str(r.kind), float(r["drop"]), float(r.atp_drop))
                            for r in hits),
        unverified=unverified, unverified_beating_bound95=upper_bound(len(hits), sampled, unverified),
        bound_share=bound_share, guard_level=guard_level,
        level_met=None if guard_level is None else bound_share <= guard_level,
        kth_candidate_p=bar_p, stopped=stopped, heads_max=plan["heads_max"], forwards_max=plan["forwards_max"],
        clean_forwards=clean_forwards)


def attribution_ranking(model: nn.Module, encoded: EncodedProbe, method: str, candidates: int = 16,
                        guard_sample: int = 8, guard_k: int = 10, atp_score: str = "margin",
                        graddrop: bool = False, seed: int = 0, batch_size: int = 32, max_rows: int = 256,
                        kinds=None, layers=None, model_name: str = "", progress: bool = True,
                        baseline: ProbeScore | None = None, guard_level: float | None = None,
                        ig_steps: int = 0, say: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, ScanGuard]:
    """``(ranking, guard)`` for ``method`` ``atp`` or ``atp+exact`` (see the module docstring).

    ``ranking``: the exact scan's ``COLUMNS`` and ``CHANGED`` (empty for heads not ablated) plus ``EXTRA``. ``guard``: a
    :class:`gna.scan.guard_result.ScanGuard`: the method, the candidates, the sample, the sampled
    heads that beat the ``guard_k``-th candidate and the bound on the unverified heads that do.

    ``guard_level``: a sequential guard. After the first ``guard_sample`` draws, more non-candidates
    are drawn (in the same seeded order) and ablated until the one-sided 95% bound on the share of
    non-candidate heads that beat the ``guard_k``-th candidate is at most ``guard_level``, or none is
    left; ``guard.bound_share`` and ``guard.level_met`` say where it stopped. ``ig_steps``:
    the integrated-gradients estimate (gna.scan.attribution.atp_scan) instead of plain AtP.

    Before any work, ``say`` (default: this module's log) gets the guard's cost in one line
    (:func:`gna.scan.guard_bounds.plan_line`), and one line per reason the probe cannot support the level
    (:func:`gna.scan.guard_bounds.guard_plan`); then the guard keeps its first ``guard_sample`` draws only.
    It also stops drawing, saying why, once its bar (the ``guard_k``-th candidate) proves not beyond
    noise, or once its hits put the level out of reach (``guard.stopped``). Every exact pass
    reuses the first one's clean forwards (:class:`gna.scan.repeated_forwards.ResidualCache`).

    Over 60 lines by this docstring only: the method's steps in order, each a function above.
    """
    say = say or log.info
    if method != "atp":
        _check_exact_settings(candidates, guard_sample, guard_k)
    mixers = select_mixers(model, kinds, layers)
    baseline = score(model, encoded, batch_size=batch_size) if baseline is None else baseline  # once, for every pass
    plan = None if method == "atp" else _planned_guard(model, encoded, mixers, baseline, batch_size, candidates,
                                                       guard_sample, guard_k, guard_level, say)
    est = atp_scan(model, encoded, mixers, batch_size=batch_size, score=atp_score, graddrop=graddrop,
                   progress=progress, ig_steps=ig_steps)
    estimate = dict(method=method, atp_score=atp_score, graddrop=graddrop, ig_steps=ig_steps, n_heads=len(est))
    if method == "atp":
        return _atp_only_rows(est, baseline.accuracy, encoded, model_name, 1), ScanGuard(**estimate)
    order = by_magnitude(est)
    cand = order.head(candidates)
    rest = order.iloc[len(cand):]
    residuals = ResidualCache([m.layer for m in mixers])  # the clean forwards, shared by every pass
    passes = _ExactPasses(model, encoded, rest, seed, dict(
        batch_size=batch_size, max_rows=max_rows, kinds=kinds, layers=layers, model_name=model_name,
        progress=progress, baseline=baseline, residuals=residuals, discordant=True), logprob_resolution(model))
    n_drawn = min(guard_sample, len(rest))
    exact = passes.rows(pd.concat([cand, passes.sample(n_drawn)]))
    # the guard: sampled non-candidates against the k-th best candidate (exact numbers both)
    in_cand = exact.merge(cand[KEY], on=KEY)
    k = min(guard_k, len(in_cand))
    bar = in_cand.sort_values("rank").iloc[k - 1] if k else None
    hits = passes.hits(exact, bar, n_drawn)
    stopped = plan["unsupported"][0] if plan["unsupported"] else None
    bar_p = None if bar is None else mcnemar_p(float(bar["drop"]), float(bar["discordant"]), len(encoded))
    if guard_level is not None and bar is not None and stopped is None:
        stopped = _bar_is_noise(bar, bar_p, k, len(encoded), len(est))
        if stopped is None:
            exact, n_drawn, hits, stopped = _draw_to_level(passes, exact, hits, n_drawn, bar, k, guard_level)
        if stopped is not None:
            say(f"guard stopped after {n_drawn} draws, level {guard_level:.2f} not met: {stopped}")
    exact = exact.drop(columns="discordant").merge(est, on=KEY).assign(exact=True)
    hits = passes.hits(exact, bar, n_drawn)  # the same heads, now with their estimates beside them
    unverified = rest.drop(rest.index[sorted(passes.draw_order[:n_drawn])])
    guard = _guard_result(estimate, plan, len(cand), len(passes.sample(n_drawn)), len(rest), len(unverified), k,
                          bar, bar_p, hits, guard_level, stopped, residuals.forwards)
    tail = _atp_only_rows(unverified, float(exact.baseline_accuracy.iloc[0]), encoded, model_name, len(exact) + 1)
    exact = exact.astype({c: "Int64" for c in CHANGED})
    ranking = pd.concat([exact[COLUMNS + CHANGED + EXTRA], tail], ignore_index=True)
    return ranking, guard
