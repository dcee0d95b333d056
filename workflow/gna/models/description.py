"""A uniform description of a model's token mixers, whatever the architecture.

A *mixer* is one token-mixing unit invoked in one layer: an attention block, a Mamba-1,
Mamba-2 or discrete Mamba-2 mixer. A *head* is a slice of the mixer's output-projection
input viewed as ``(..., n_heads, head_dim)``; zeroing it removes that head's contribution.
Zamba2's shared attention block is invoked from several layers: each invocation is its own
mixer here (``layer`` = the invoking layer), so a head is (invocation layer, head). Falcon-H1 runs
attention and Mamba-2 in parallel in every layer: two mixers per layer, told apart by ``kind``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from ..errors import HeadIndexError, LayerIndexError

if TYPE_CHECKING:
    from torch import nn

KINDS = ("attention", "mamba1", "mamba2", "discrete-mamba2")


@dataclass(frozen=True)
class Mixer:
    layer: int
    kind: str
    n_heads: int
    head_dim: int
    out_proj: nn.Module = field(repr=False, compare=False)
    """Module whose *input* holds the heads: shape ``(..., n_heads * head_dim)``."""
    out_proj_path: str = ""
    module: nn.Module | None = field(default=None, repr=False, compare=False)
    """The token-mixing module itself (``self_attn``, ``mixer``, ``mamba``): patterns are read here."""
    kv_heads: int | None = None
    """Number of key/value heads (attention only); ``n_heads // kv_heads`` share one K/V."""
    invocation: nn.Module | None = field(default=None, repr=False, compare=False)
    """Module whose forward brackets this invocation, when ``out_proj`` is shared (Zamba2)."""

    @property
    def kv_group(self) -> int | None:
        return None if self.kv_heads is None else self.n_heads // self.kv_heads

    def kv_head_of(self, head: int) -> int | None:
        return None if self.kv_heads is None else head // self.kv_group


@dataclass
class ModelDescription:
    family: str
    n_layers: int
    mixers: list[Mixer]

    def __post_init__(self):
        self._by_layer: dict[int, list[Mixer]] = {}
        for m in self.mixers:
            self._by_layer.setdefault(m.layer, []).append(m)

    @property
    def n_heads_total(self) -> int:
        return sum(m.n_heads for m in self.mixers)

    def check_layer(self, layer: int) -> int:
        if not isinstance(layer, int) or isinstance(layer, bool):
            raise LayerIndexError(f"layer must be an int, got {layer!r}")
        if not 0 <= layer < self.n_layers:
            raise LayerIndexError(
                f"layer {layer} is out of range: this {self.family} model has "
                f"{self.n_layers} layers (0..{self.n_layers - 1})")
        return layer

    def mixers_in(self, layer: int) -> list[Mixer]:
        return self._by_layer.get(self.check_layer(layer), [])

    def mixer(self, layer: int, kind: str | None = None) -> Mixer:
        """The mixer of ``layer`` (of ``kind`` where a layer has several, as in Zamba2)."""
        found = self.mixers_in(layer)
        if kind is not None:
            found = [m for m in found if m.kind == kind]
        if len(found) == 1:
            return found[0]
        kinds = [m.kind for m in self.mixers_in(layer)]
        if not found:
            raise HeadIndexError(
                f"layer {layer} has no {kind or 'token'} mixer; it has: {kinds or 'none'}")
        raise HeadIndexError(
            f"layer {layer} has several mixers {kinds}: name the kind, e.g. (layer, head, 'attention')")

    def head(self, ref) -> tuple[Mixer, int]:
        """Resolve ``(layer, head)`` or ``(layer, head, kind)`` to its mixer and head index."""
        if not isinstance(ref, (tuple, list)) or len(ref) not in (2, 3):
            raise HeadIndexError(f"a head is (layer, head) or (layer, head, kind); got {ref!r}")
        layer, head = ref[0], ref[1]
        mixer = self.mixer(layer, ref[2] if len(ref) == 3 else None)
        if not isinstance(head, int) or isinstance(head, bool) or not 0 <= head < mixer.n_heads:
            raise HeadIndexError(
                f"head {head!r} is out of range for the {mixer.kind} mixer of layer {layer}: "
                f"it has {mixer.n_heads} heads (0..{mixer.n_heads - 1})")
        return mixer, head

    def heads(self) -> Iterator[tuple[int, int, str]]:
        """Every head as ``(layer, head, kind)``, in layer order."""
        for m in self.mixers:
            for h in range(m.n_heads):
                yield (m.layer, h, m.kind)
