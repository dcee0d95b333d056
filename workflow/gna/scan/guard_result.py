"""What a scan says about how far its ranking was verified: :class:`ScanGuard`.

``exact`` ablates every head, so there is nothing to guard; ``atp`` ablates none; ``atp+exact``
ablates the estimate's top candidates and a uniform sample of the other heads, and bounds how many
unverified heads would beat its ``guard_k``-th candidate (:mod:`gna.scan.attribution_ranking`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GuardHead:
    """One head the guard names: the bar (its ``guard_k``-th candidate) or a sampled head that beat it.
    ``drop``: its exact accuracy drop; ``atp_drop``: its attribution estimate (NaN for the bar)."""
    layer: int
    head: int
    kind: str
    drop: float
    atp_drop: float = float("nan")

    @property
    def label(self) -> str:
        return f"L{self.layer}H{self.head} {self.kind}"


@dataclass(frozen=True)
class ScanGuard:
    """The scan's method and, for ``atp+exact``, its false-negative guard.

    ``n_heads``: heads ranked. The estimate's settings (``atp_score``, ``graddrop``, ``ig_steps``)
    are ``None`` for ``exact``. The rest holds for ``atp+exact`` only (zero, empty or ``None``
    otherwise): ``candidates`` ablated exactly, ``sampled`` non-candidates drawn and ablated,
    ``guard_k`` (the candidate rank the sample is held against, at most the candidates),
    ``kth_candidate`` (that bar), ``beating_heads`` (the sampled heads that beat it),
    ``unverified`` (heads ranked by the estimate only), ``unverified_beating_bound95`` (the
    one-sided 95% Clopper-Pearson bound on how many of them would beat it) and ``bound_share``
    (the bound on the share of all non-candidates), ``guard_level`` and whether ``level_met``
    (``None`` without a level), ``kth_candidate_p`` (the bar's McNemar p-value), ``stopped`` (why
    the guard stopped drawing before the level, else ``None``), ``heads_max`` and ``forwards_max``
    (its planned most heads and forwards per prompt row) and ``clean_forwards`` (clean forward
    passes run, shared by every exact pass)."""
    method: str
    n_heads: int
    atp_score: str | None = None
    graddrop: bool | None = None
    ig_steps: int | None = None
    candidates: int = 0
    sampled: int = 0
    guard_k: int = 0
    kth_candidate: GuardHead | None = None
    beating_heads: tuple[GuardHead, ...] = ()
    unverified: int = 0
    unverified_beating_bound95: float = 0.0
    bound_share: float | None = None
    guard_level: float | None = None
    level_met: bool | None = None
    kth_candidate_p: float | None = None
    stopped: str | None = None
    heads_max: int | None = None
    forwards_max: float | None = None
    clean_forwards: int = 0

    @property
    def sample_beats_kth(self) -> int:
        """Sampled heads that beat the ``guard_k``-th candidate."""
        return len(self.beating_heads)

    def summary(self) -> str:
        """One line for the log and the CLI."""
        if self.method == "exact":
            return f"exact: all {self.n_heads} heads ablated"
        if self.method == "atp":
            return f"atp: {self.n_heads} heads ranked by the attribution estimate only (no ablation)"
        bar = self.kth_candidate
        line = (f"atp+exact: {self.candidates} candidates + {self.sampled} sampled of {self.n_heads} heads ablated "
                f"exactly; {self.sample_beats_kth} sampled heads beat candidate #{self.guard_k}"
                + (f" ({bar.label}, drop {bar.drop:.3f})" if bar else "")
                + f"; 95% bound on unverified heads that would: {self.unverified_beating_bound95:.1f} "
                  f"of {self.unverified}")
        if self.guard_level is None:
            return line
        verdict = ("met" if self.level_met else f"NOT met: the guard stopped, {self.stopped}" if self.stopped
                   else "NOT met: every head was drawn")
        return line + f" (share {self.bound_share:.2f}, level {self.guard_level:.2f} {verdict})"
