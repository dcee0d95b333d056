"""The named interventions a config or a rule can ask for, as plain data, and their labels.

    [{"truncate": 18}, {"ablate_heads": [[16, 22], [17, 24]]}]

Kinds: ``truncate: n_layers``, ``drop_layer: i``, ``ablate_heads: [[layer, head(, kind)], ...]``,
``keep_heads: {layer, heads, kind?}`` (several layers: a list of them), ``mask_last_row: "all" |
[[layer, head(, kind)], ...]`` (the heads contribute nothing at the answer position: the official
Zamba2 experiment, :func:`gna.interventions.mask_last_row`). :func:`applied` enters them as the
context managers of this package; :func:`label` names a list of them in result rows.
A new intervention: its context manager in this package, its key here (both functions).
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

from torch import nn

from ..errors import ConfigError
from .head_ablation import ablate_heads, keep_heads
from .layers import drop_layer, truncate
from .rows import mask_last_row

INTERVENTIONS = ("truncate", "drop_layer", "ablate_heads", "keep_heads", "mask_last_row")


def _one(spec: dict) -> tuple[str, Any]:
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in INTERVENTIONS:
        raise ConfigError(f"an intervention is a one-key mapping with a key in {INTERVENTIONS}; got {spec!r}")
    return next(iter(spec.items()))


@contextmanager
def applied(model: nn.Module, specs: list[dict]) -> Iterator[nn.Module]:
    """Apply every intervention of ``specs`` (validated before any is entered)."""
    parsed = [_one(s) for s in specs or []]
    with ExitStack() as stack:
        for kind, arg in parsed:
            if kind == "truncate":
                stack.enter_context(truncate(model, arg))
            elif kind == "drop_layer":
                stack.enter_context(drop_layer(model, arg))
            elif kind == "ablate_heads":
                if arg:
                    stack.enter_context(ablate_heads(model, [tuple(h) for h in arg]))
            elif kind == "mask_last_row":
                if arg:
                    stack.enter_context(mask_last_row(model, arg if isinstance(arg, str) else [tuple(h) for h in arg]))
            else:
                for keep in arg if isinstance(arg, list) else [arg]:
                    stack.enter_context(keep_heads(model, keep["layer"], keep.get("heads") or [], keep.get("kind")))
        yield model


def first_changed_layer(specs: list[dict], n_layers: int) -> int:
    """The lowest layer ``specs`` change (``n_layers`` where they change none: ``truncate: n_layers``,
    an empty head list): the layers below it compute what the unmodified model's do, so the residual
    stream entering it is the unmodified model's."""
    first = n_layers
    for kind, arg in (_one(s) for s in specs or []):
        if kind in ("truncate", "drop_layer"):
            first = min(first, int(arg))
        elif kind == "mask_last_row" and arg == "all":
            first = 0
        elif kind in ("ablate_heads", "mask_last_row"):
            first = min([first] + [int(h[0]) for h in arg or []])
        else:
            first = min([first] + [int(k["layer"]) for k in (arg if isinstance(arg, list) else [arg])])
    return first


def label(specs: list[dict]) -> str:
    """A short readable name of an intervention list, e.g. ``truncate=18+ablate=L16H22``."""
    parts = []
    for kind, arg in (_one(s) for s in specs or []):
        if kind == "ablate_heads":
            parts.append("ablate=" + (",".join(f"L{h[0]}H{h[1]}" for h in arg) if arg else "none"))
        elif kind == "mask_last_row":
            parts.append("last_row=" + (arg if isinstance(arg, str) else
                                        ",".join(f"L{h[0]}H{h[1]}" for h in arg) if arg else "none"))
        elif kind == "keep_heads":
            keeps = arg if isinstance(arg, list) else [arg]
            parts.append("keep=" + ",".join(f"L{k['layer']}:{'/'.join(map(str, k.get('heads') or [])) or 'none'}"
                                            for k in keeps))
        else:
            parts.append(f"{kind}={arg}")
    return "+".join(parts) or "none"
