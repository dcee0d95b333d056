"""The one verdict rule of every findings section: a claim's parts, each an estimate with its 95%
interval against the claim's line and the paper's own effect, and the claim's verdict from its parts.

A part (:class:`Part`) claims an effect beyond a ``line`` (``above``: an effect at least the line, a
fall or a gain; not ``above``: at most it, something that stays within a margin):

- **holds** only where the whole interval lies beyond the line on the claim's side;
- **does not hold** only where the whole interval lies on the other side of the line *and* excludes
  the paper's own effect scaled to this model (``paper``, :mod:`gna.report.findings.paper`): a result
  the paper itself would produce is no refutation of it. A part the paper gave no number for is
  refuted by its line alone;
- **not resolved** otherwise: the interval straddles the line (or reaches the paper's effect);
- **not resolved (underpowered: smallest detectable effect x)** where it is not resolved and the
  test's smallest effect detectable at 80% power and 5% two-sided (``detectable``,
  :mod:`gna.evaluation.power`) is larger than what it had to see: the paper's scaled effect for a
  part that claims an effect (its line where the paper gave no number), the margin for one that
  claims something stays. Power is what a test of that size could have seen; an interval that lies beyond
  the line, or that excludes the paper's effect, is a 95% interval all the same, so "holds" and
  "does not hold" stand at any power.

A claim of several parts (:func:`claim_verdict`): **holds** where every part holds; **partly** where
some part holds and some other is refuted (the claim is shown in part and contradicted in part);
**does not hold** where some part is refuted and none holds; else **not resolved** (some part
unresolved, none refuted), "underpowered" where an unresolved part is. ``n/a`` (a model near chance
on the claim's task) is decided before any part, by the sections.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

HOLDS, PARTLY, REFUTED, UNRESOLVED, NA = "holds", "partly", "does not hold", "not resolved", "n/a"


@dataclass(frozen=True)
class Part:
    """One tested part of a claim: ``estimate`` [``low``, ``high``] (95%) against ``line``; ``paper``
    the paper's effect on this model's scale (None: unpublished), ``detectable`` the test's smallest
    effect at 80% power (None: not computed), all in the same unit."""

    name: str
    estimate: float
    low: float
    high: float
    line: float
    above: bool = True
    paper: float | None = None
    detectable: float | None = None

    def __post_init__(self):
        if not self.low <= self.high or any(math.isnan(v) for v in (self.low, self.high, self.line)):
            raise ValueError(f"{self.name}: an interval [{self.low}, {self.high}] against line {self.line} "
                             "is not one to judge")

    @property
    def beyond(self) -> bool:
        """The interval lies beyond the line on the claim's side."""
        return self.low > self.line if self.above else self.high < self.line

    @property
    def against(self) -> bool:
        """The interval lies on the other side of the line and excludes the paper's effect."""
        if self.above:
            return self.high < self.line and (self.paper is None or self.high < self.paper)
        return self.low > self.line and (self.paper is None or self.low > self.paper)

    @property
    def needed(self) -> float | None:
        """The effect the test had to be able to see: for a part claiming an effect, the paper's (its
        line where the paper has no number); for one claiming something stays, its margin (the line),
        an interval under which is what "holds" asks for. None where that is no effect (a line at 0)."""
        need = abs(self.paper) if self.above and self.paper is not None else abs(self.line)
        return need if need > 0 else None

    @property
    def underpowered(self) -> bool:
        return self.detectable is not None and self.needed is not None and self.detectable > self.needed

    @property
    def verdict(self) -> str:
        if self.beyond:
            return HOLDS
        if self.against:
            return REFUTED
        return underpowered(self.detectable) if self.underpowered else UNRESOLVED

    def text(self, digits: int = 2) -> str:
        """'name +0.61 [+0.53, +0.68] vs line 0.33 (paper 0.66; detectable 0.13): holds'."""
        f = f"+.{digits}f"
        extra = [f"paper {self.paper:.{digits}f}" if self.paper is not None else "no paper number"]
        if self.detectable is not None:
            extra.append(f"detectable {self.detectable:.{digits}f}")
        side = ">" if self.above else "<"
        return (f"{self.name} {self.estimate:{f}} [{self.low:{f}}, {self.high:{f}}] vs {side} "
                f"{self.line:.{digits}f} ({'; '.join(extra)}): {self.verdict}")


def underpowered(detectable: float, digits: int = 2) -> str:
    return (f"{UNRESOLVED} (underpowered: smallest detectable effect "
            f"{'none' if math.isinf(detectable) else f'{detectable:.{digits}f}'})")


def claim_verdict(parts: list[Part]) -> str:
    """The claim's verdict from its parts' (see the module docstring)."""
    if not parts:
        raise ValueError("a claim's verdict needs at least one tested part")
    verdicts = [p.verdict for p in parts]
    held, refuted = HOLDS in verdicts, REFUTED in verdicts
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    if held and refuted:
        return PARTLY
    if refuted:
        return REFUTED
    weak = [p.detectable for p in parts if p.verdict.startswith(f"{UNRESOLVED} (underpowered")]
    return underpowered(max(weak)) if weak else UNRESOLVED


def evidence(parts: list[Part], digits: int = 2) -> str:
    """Every part's test, as the findings print it."""
    return "tests (95% intervals; 80% power, 5%): " + "; ".join(p.text(digits) for p in parts)
