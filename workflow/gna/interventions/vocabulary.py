"""The named interventions a config or a rule can ask for, as plain data, and their labels.

    [{"truncate": 18}, {"ablate_heads": [[16, 22], [17, 24]]}]

Kinds: ``truncate: n_layers``, ``drop_layer: i``, ``ablate_heads: [[layer, head(, kind)], ...]``,
``keep_heads: {layer, heads, kind?}`` (several layers: a list of them), ``mask_last_row: "all" |
[[layer, head(, kind)], ...]`` (the heads contribute nothing at the answer position: the official
Zamba2 experiment, :func:`gna.interventions.mask_last_row`).

The kinds are one table, :data:`KINDS`: kind -> :class:`Kind`, which says how the kind applies, the
lowest layer it changes and how it is named. :func:`applied`, :func:`first_changed_layer` and
:func:`label` only read the table. A new intervention is one :func:`register` call here, its context
manager in this package where several experiments use it, or in the computation module of the one
experiment that does (docs/adding-an-experiment.md); a :class:`Kind` lacking any of the three is refused
when it is built.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator

from torch import nn

from ..errors import ConfigError
from .head_ablation import ablate_heads, keep_heads
from .layers import drop_layer, truncate
from .rows import mask_last_row


@dataclass(frozen=True)
class Kind:
    """One intervention kind. ``arg`` is the value of its key in a spec (``{"truncate": 18}``: 18).

    ``apply(stack, model, arg)``: enter its context managers on ``stack`` (none for an empty head list).
    ``first_layer(arg, n_layers)``: the lowest layer it changes (``n_layers`` where it changes none).
    ``label(arg)``: its part of a result row's intervention name (``ablate=L16H22``)."""

    apply: Callable[[ExitStack, nn.Module, Any], None]
    first_layer: Callable[[Any, int], int]
    label: Callable[[Any], str]

    def __post_init__(self):
        # a kind missing one of its three would fail only when a config first uses it, deep in a job
        missing = [f.name for f in fields(self) if not callable(getattr(self, f.name))]
        if missing:
            raise TypeError(f"an intervention kind needs apply, first_layer and label; not callable: {missing}")


KINDS: dict[str, Kind] = {}


def register(name: str, kind: Kind) -> None:
    """Add ``kind`` to the table under ``name`` (refused: a name taken, or not a :class:`Kind`)."""
    if not isinstance(kind, Kind):
        raise TypeError(f"intervention {name!r}: a Kind(apply, first_layer, label), got {kind!r}")
    if name in KINDS:
        raise ValueError(f"intervention {name!r} is registered twice")
    KINDS[name] = kind


def _heads(arg) -> list[tuple]:
    return [tuple(h) for h in arg]


def _heads_label(arg) -> str:
    return ",".join(f"L{h[0]}H{h[1]}" for h in arg) if arg else "none"


def _lowest_head_layer(arg, n_layers: int) -> int:
    return min([n_layers] + [int(h[0]) for h in arg or []])


def _keeps(arg) -> list[dict]:
    return arg if isinstance(arg, list) else [arg]


def _apply_keeps(stack, model, arg) -> None:
    for keep in _keeps(arg):
        stack.enter_context(keep_heads(model, keep["layer"], keep.get("heads") or [], keep.get("kind")))


def _apply_ablation(stack, model, heads) -> None:
    if heads:   # an empty list (a role with no head found) is the unmodified model
        stack.enter_context(ablate_heads(model, _heads(heads)))


def _apply_last_row(stack, model, arg) -> None:
    if arg:
        stack.enter_context(mask_last_row(model, arg if isinstance(arg, str) else _heads(arg)))


register("truncate", Kind(apply=lambda stack, model, n: stack.enter_context(truncate(model, n)),
                          first_layer=lambda n, n_layers: int(n), label=lambda n: f"truncate={n}"))
register("drop_layer", Kind(apply=lambda stack, model, i: stack.enter_context(drop_layer(model, i)),
                            first_layer=lambda i, n_layers: int(i), label=lambda i: f"drop_layer={i}"))
register("ablate_heads", Kind(apply=_apply_ablation, first_layer=_lowest_head_layer,
                              label=lambda heads: "ablate=" + _heads_label(heads)))
register("keep_heads", Kind(
    apply=_apply_keeps,
    first_layer=lambda arg, n_layers: min([n_layers] + [int(k["layer"]) for k in _keeps(arg)]),
    label=lambda arg: "keep=" + ",".join(f"L{k['layer']}:{'/'.join(map(str, k.get('heads') or [])) or 'none'}"
                                         for k in _keeps(arg))))
# "all": every head of every layer, so the first layer changes
register("mask_last_row", Kind(
    apply=_apply_last_row,
    first_layer=lambda arg, n_layers: 0 if arg == "all" else _lowest_head_layer(arg, n_layers),
    label=lambda arg: "last_row=" + (arg if isinstance(arg, str) else _heads_label(arg))))

INTERVENTIONS = tuple(KINDS)   # the kinds this module registers (a later register() adds to KINDS only)


def _one(spec: dict) -> tuple[Kind, Any]:
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in KINDS:
        raise ConfigError(f"an intervention is a one-key mapping with a key in {tuple(KINDS)}; got {spec!r}")
    name, arg = next(iter(spec.items()))
    return KINDS[name], arg


@contextmanager
def applied(model: nn.Module, specs: list[dict]) -> Iterator[nn.Module]:
    """Apply every intervention of ``specs`` (validated before any is entered)."""
    parsed = [_one(s) for s in specs or []]
    with ExitStack() as stack:
        for kind, arg in parsed:
            kind.apply(stack, model, arg)
        yield model


def first_changed_layer(specs: list[dict], n_layers: int) -> int:
    """The lowest layer ``specs`` change (``n_layers`` where they change none: ``truncate: n_layers``,
    an empty head list): the layers below it compute what the unmodified model's do, so the residual
    stream entering it is the unmodified model's."""
    return min([n_layers] + [kind.first_layer(arg, n_layers) for kind, arg in (_one(s) for s in specs or [])])


def label(specs: list[dict]) -> str:
    """A short readable name of an intervention list, e.g. ``truncate=18+ablate=L16H22``."""
    return "+".join(kind.label(arg) for kind, arg in (_one(s) for s in specs or [])) or "none"
