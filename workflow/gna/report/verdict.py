"""The one verdict rule of every findings section: a claim's parts, each an estimate with its
interval against the claim's line and the paper's own effect, and the claim's verdict from its parts.

A part (:class:`Part`) claims an effect beyond a ``line`` (``above``: an effect at least the line, a
fall or a gain; not ``above``: at most it, something that stays within a margin). Its interval is a
two-sided 95% one unless the part says otherwise (a condition picked as the extreme of ``m``
candidates: Bonferroni's two-sided 1 - 0.05/m, which is what the family's Holm test rejects at for its
first, most extreme, member). Each end is read alone, so a verdict is a one-sided test at 2.5% (or
0.025/m); no other one-sided test is used.

- **holds** only where the whole interval lies beyond the line on the claim's side;
- **does not hold** only where the whole interval lies on the other side of the line *and* excludes
  the paper's own effect scaled to this model (``paper``, :mod:`gna.report.findings.paper`): a result
  the paper itself would produce is no refutation of it;
- a part with a line at 0 and no paper number (random minus ranked heads, a control, a difference the
  paper states in words) is judged against its **smallest effect of interest** (``soi``, a config
  value, ``smallest_effect``): **holds** where the interval lies above it, **does not hold** where it
  lies below it (an effect that large is excluded). Against a line at 0 alone, a true null would read
  "not resolved" 97.5% of the time whatever the n: it could never be refuted;
- **not resolved** otherwise: the interval straddles the line (or reaches the paper's effect);
- **not resolved (underpowered: smallest detectable effect x)** where it is not resolved and the
  test's smallest effect detectable at 80% power and the interval's level (``detectable``,
  :mod:`gna.evaluation.power`) exceeds the distance it had to see: from the line to the paper's
  scaled effect (to clear the line when the truth is the paper's effect, a test needs
  detectable <= |paper - line|), or to the smallest effect of interest where the paper has no
  number. A part that claims something stays (not ``above``) is powered as an equivalence test: its
  interval's far end must come inside the margin when the truth is the paper's (mostly no change),
  the same distance |line - paper| (its line's own size where the paper has no number). "holds" and
  "does not hold" stand at any power: an interval beyond the line, or one that excludes the paper's
  effect, is a 95% interval all the same.

Each part says how it was tested: ``paired`` (the two conditions' answers item by item: Newcombe's
paired interval, McNemar's test), unpaired and why (``method``), or at the level of random draws (the
draw as the unit: a t interval over the draws' differences, ``d - 1`` degrees of freedom).

A claim of several parts (:func:`claim_verdict`): **holds** where every part holds; **partly** where
some part holds and some other is refuted (the claim is shown in part and contradicted in part);
**does not hold** where some part is refuted and none holds; else **not resolved** (some part
unresolved, none refuted), "underpowered" where an unresolved part is. ``n/a`` (a model near chance
on the claim's task) is decided before any part, by the sections.

Every part :func:`evidence` prints is also recorded (:func:`recording`), so that the findings can
write them as a table (``verdicts.csv``) and draw them (``verdicts.png``), one row per printed part.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

HOLDS, PARTLY, REFUTED, UNRESOLVED, NA = "holds", "partly", "does not hold", "not resolved", "n/a"


@dataclass(frozen=True)
class Part:
    """One tested part of a claim: ``estimate`` [``low``, ``high``] against ``line``; ``paper`` the
    paper's effect on this model's scale (None: unpublished), ``detectable`` the test's smallest effect
    at 80% power (None: not computed), ``soi`` the smallest effect of interest (used where the line is
    0 and the paper has no number), all in the same unit. ``n``: the items (or draws) behind it;
    ``paired``: True (item by item), False (unpaired), None (not a comparison of two conditions'
    items: a draw-level test, a combination); ``method``: how, in words (why unpaired; the level of an
    adjusted interval; the draw-level test)."""

    name: str
    estimate: float
    low: float
    high: float
    line: float
    above: bool = True
    paper: float | None = None
    detectable: float | None = None
    soi: float | None = None
    n: int | None = None
    paired: bool | None = None
    method: str = ""

    def __post_init__(self):
        if not self.low <= self.high or any(math.isnan(v) for v in (self.low, self.high, self.line)):
            raise ValueError(f"{self.name}: an interval [{self.low}, {self.high}] against line {self.line} "
                             "is not one to judge")

    @property
    def by_soi(self) -> bool:
        """Judged against the smallest effect of interest: a line at 0, no paper number, an soi given."""
        return self.line == 0 and self.paper is None and self.soi is not None and self.soi > 0

    @property
    def judged_line(self) -> float:
        """The line the interval is read against: the smallest effect of interest where :attr:`by_soi`."""
        if self.by_soi:
            return self.soi if self.above else -self.soi
        return self.line

    @property
    def beyond(self) -> bool:
        """The interval lies beyond the line on the claim's side."""
        line = self.judged_line
        return self.low > line if self.above else self.high < line

    @property
    def against(self) -> bool:
        """The interval lies on the other side of the line and excludes the paper's effect."""
        line = self.judged_line
        if self.above:
            return self.high < line and (self.paper is None or self.high < self.paper)
        return self.low > line and (self.paper is None or self.low > self.paper)

    @property
    def needed(self) -> float | None:
        """The distance the test had to be able to see: from the line to the paper's effect; where the
        paper has no number, to the smallest effect of interest (a line at 0), else the line's own size
        (a margin, an effect beyond a line the paper does not quantify). None where that is no distance."""
        if self.by_soi:
            need = abs(self.soi)
        elif self.paper is not None:
            need = abs(self.paper - self.line)
        else:
            need = abs(self.line)
        return need if need > 0 else None

    @property
    def underpowered(self) -> bool:
        return self.detectable is not None and self.needed is not None and self.detectable > self.needed + 1e-9

    @property
    def verdict(self) -> str:
        if self.beyond:
            return HOLDS
        if self.against:
            return REFUTED
        return underpowered(self.detectable) if self.underpowered else UNRESOLVED

    def text(self, digits: int = 2) -> str:
        """'name +0.61 [+0.53, +0.68] vs > 0.33 (paper 0.66; detectable 0.13; paired): holds'."""
        f = f"+.{digits}f"
        extra = [f"paper {self.paper:.{digits}f}" if self.paper is not None else "no paper number"]
        if self.by_soi:
            extra[0] = "the smallest effect of interest, no paper number"
        if self.detectable is not None:
            extra.append(f"detectable {'none' if math.isinf(self.detectable) else f'{self.detectable:.{digits}f}'}")
        if self.n is not None:
            extra.append(f"n {self.n}")
        how = "paired" if self.paired else ("unpaired" if self.paired is False else "")
        how = "; ".join(x for x in (how, self.method) if x)
        if how:
            extra.append(how)
        side = ">" if self.above else "<"
        return (f"{self.name} {self.estimate:{f}} [{self.low:{f}}, {self.high:{f}}] vs {side} "
                f"{abs(self.judged_line) if self.by_soi else self.line:.{digits}f} ({'; '.join(extra)}): "
                f"{self.verdict}")

    def row(self) -> dict:
        """The part as a row of ``verdicts.csv`` (see :data:`COLUMNS`; claim and model added by the caller)."""
        return dict(part=self.name, estimate=self.estimate, low=self.low, high=self.high, line=self.judged_line,
                    above=self.above, paper=self.paper, detectable=self.detectable, n=self.n,
                    paired={True: "paired", False: "unpaired"}.get(self.paired, "not a pair"),
                    method=self.method, verdict=self.verdict)


COLUMNS = ["claim", "model", "part", "estimate", "low", "high", "line", "above", "paper", "detectable", "n",
           "paired", "method", "verdict"]
"""``verdicts.csv``: one row per printed part; ``line`` the one its interval is read against (the
smallest effect of interest where that is what it is judged by)."""


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


_RECORDED: list[list[tuple[Part, int]]] = []


@contextmanager
def recording():
    """Collect every part :func:`evidence` prints inside the block: yields the list of (part, digits)."""
    seen: list[tuple[Part, int]] = []
    _RECORDED.append(seen)
    try:
        yield seen
    finally:
        _RECORDED.remove(seen)


def evidence(parts: list[Part], digits: int = 2) -> str:
    """Every part's test, as the findings print it."""
    for seen in _RECORDED:
        seen.extend((p, digits) for p in parts)
    return "tests (95% intervals unless said; 80% power): " + "; ".join(p.text(digits) for p in parts)


def t_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean, low, high, detectable) of ``values`` (one a draw) with Student's t interval on
    ``len(values) - 1`` degrees of freedom, and the smallest mean the t test detects at 80% power
    (``(t_level + t_0.80) s / sqrt(d)``, the noncentral t approximated by a shift). Needs two values."""
    from scipy.stats import t

    d = len(values)
    if d < 2:
        raise ValueError(f"a t interval needs at least two draws, got {d}")
    mean = sum(values) / d
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (d - 1))
    se = sd / math.sqrt(d)
    q = float(t.ppf(1 - (1 - level) / 2, d - 1))
    return mean, mean - q * se, mean + q * se, (q + float(t.ppf(0.80, d - 1))) * se
