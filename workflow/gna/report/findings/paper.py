"""The paper's effects that the verdicts weigh a run against, from one table with their sources
(``paper_effects.csv`` beside this module): per claim, the paper's model, task and metric, the
accuracy before and after the paper's intervention, that task's chance, and where the numbers are
(figure, table or slide, and the file under ``shared/paper/published`` or ``data/published``). A
claim the paper shows only as a curve or in words has a row with no numbers: it has no effect to
scale, and its verdicts say so.

An effect is carried to another model by its share of the range it can move in (``scale``):
``above_chance``, a fall towards chance, as a share of the paper model's accuracy above chance
(``effect_model = effect_paper / (paper_base - paper_chance) * (model_base - model_chance)``);
``headroom``, a gain, as a share of what lay above the paper's starting accuracy (up to 100%).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ...errors import GnaError

TABLE = Path(__file__).with_name("paper_effects.csv")


class PaperEffectError(GnaError, KeyError):
    """A verdict asked for a paper effect the table does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class PaperEffect:
    """One row of the table; accuracies in percent (perplexities as they are)."""

    claim: str
    paper_model: str
    task: str
    metric: str
    condition: str
    before: float
    after: float
    chance: float
    scale: str
    heads_removed: float
    heads_total: float
    source: str

    @property
    def published(self) -> bool:
        return not (math.isnan(self.before) or math.isnan(self.after))

    @property
    def effect(self) -> float:
        """The size of the paper's change, in points (a fall or a gain by ``scale``)."""
        return abs(self.after - self.before)

    @property
    def share(self) -> float:
        """The effect as a share of the range it moves in (see the module docstring); nan unpublished."""
        if not self.published:
            return math.nan
        span = (self.before - self.chance) if self.scale == "above_chance" else (100.0 - self.before)
        return self.effect / span if span > 0 else math.nan

    def scaled(self, base: float, chance: float, unit: float = 1.0) -> float | None:
        """The effect on a model at ``base`` with ``chance`` (both in ``unit``: 1 for 0-1, 100 for
        percent), in that unit; None where the paper published no number."""
        if not self.published:
            return None
        span = (base - chance) if self.scale == "above_chance" else (unit - base)
        return self.share * max(span, 0.0)

    def text(self, digits: int = 1) -> str:
        """'Llama-3.1-8B-Instruct: mmlu 68.1 -> 25.0 (condition; source)' or the unpublished claim."""
        shown = (f"{self.task} {self.before:.{digits}f} -> {self.after:.{digits}f}" if self.published
                 else f"{self.task}: no number published")
        return f"{self.paper_model} (paper): {shown}, {self.condition}"


@lru_cache(maxsize=1)
def table() -> pd.DataFrame:
    return pd.read_csv(TABLE)


_TEXT = ("claim", "paper_model", "task", "metric", "condition", "scale", "source")


def _row(r) -> PaperEffect:
    return PaperEffect(**{f: str(r[f]) if f in _TEXT else float(r[f]) for f in PaperEffect.__dataclass_fields__})


def effect(claim: str, task: str | None = None) -> PaperEffect:
    """The table's row for ``claim`` (and ``task``, where the claim has several); refused in one line
    where there is none or more than one."""
    t = table()
    rows = t[(t.claim == claim) & ((t.task == task) if task is not None else True)]
    if len(rows) != 1:
        raise PaperEffectError(f"paper effect {claim!r}{f' on {task}' if task else ''}: {len(rows)} rows in "
                               f"{TABLE.name}, need one")
    return _row(rows.iloc[0])


def at_share(claim: str, task: str, share: float) -> PaperEffect | None:
    """A top-k claim's row at the paper's largest k whose share of its heads is at most ``share``
    (a share of heads in 0-1): the paper's effect grows with k, so this is the least it would predict
    at ours. The smallest k where ours is below every k the paper removed; None where ``task`` has none."""
    t = table()
    rows = t[(t.claim == claim) & (t.task == task)].copy()
    if rows.empty:
        return None
    rows["share"] = rows.heads_removed / rows.heads_total
    under = rows[rows.share <= share + 1e-12]
    pick = under.loc[under.share.idxmax()] if not under.empty else rows.loc[rows.share.idxmin()]
    return _row(pick)
