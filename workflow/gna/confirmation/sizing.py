"""How many fresh items a part needs, and what they cost.

A part compares two conditions on the same items (paired). Its n is Connor's McNemar n
(:func:`gna.evaluation.power.paired_n`) at the screen's discordance ``psi`` (the share of the screen's
items answered right in exactly one of the two conditions) for a difference equal to the distance the
verdict rule asks the test to see (:attr:`gna.report.verdict.Part.needed`): from the claim's line to the
paper's effect scaled to this model, or the line's own size (a margin, a line the paper does not
quantify), at the part's level (Bonferroni's ``alpha / m`` for the extreme of ``m``). A part that
claims something stays is powered as the rule powers it, as an equivalence test over the same distance.

    n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2       (psi raised to d where below it)

A screen that saw no discordant item at all (``psi`` 0) gives no rate to plan on: the independent
discordance at the screen's accuracy stands in (which errs towards more items).
"""
from __future__ import annotations

import math

from ..evaluation.power import ALPHA, POWER, independent_discordance, paired_n


def part_n(distance: float, discordance: float, base: float, m: int = 1, alpha: float = ALPHA,
           power: float = POWER) -> int | None:
    """The paired items that see ``distance`` at ``power`` and level ``alpha / m`` (None: no distance)."""
    if not distance or distance <= 0:
        return None
    psi = discordance if discordance > 0 else independent_discordance(min(max(base, distance), 1.0), distance)
    return paired_n(distance, discordance=psi, alpha=alpha / max(m, 1), power=power)


def capped(n: int | None, cap: int) -> tuple[int, bool]:
    """(the items run, whether the cap cut the part below its n)."""
    if n is None:
        return cap, False
    return min(n, cap), n > cap


def condition_seconds(items: dict[str, int], seconds_per_item: dict[str, float], share: float = 1.0) -> float:
    """CPU seconds of one condition scoring ``items`` (role -> n) at the model's rates (role -> CPU s an item
    at full depth); ``share``: the part of the model's layers it runs (a truncation, a removal's layers
    above the shared ones)."""
    missing = sorted(set(items) - set(seconds_per_item))
    if missing:
        raise KeyError(f"no CPU rate for {missing} (confirmation.seconds_per_item)")
    return share * sum(n * seconds_per_item[role] for role, n in items.items())


def growth_n(distance: float, pairs: list[tuple[float, float]], alpha: float = ALPHA, power: float = POWER) -> int:
    """Prompts a point that a difference of two paired drops (each on its own prompts, ``pairs``: each
    one's discordance and drop) needs to see ``distance``: their variances add,
    ``n = (z_a + z_b)^2 sum(psi - d^2) / distance^2``."""
    from ..evaluation.power import _z, _z_alpha

    var = sum(max(psi - d * d, 1e-9) for psi, d in pairs)
    return math.ceil((_z_alpha(alpha) + _z(power)) ** 2 * var / distance ** 2)
