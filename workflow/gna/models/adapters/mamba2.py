"""Mamba-2: heads at the input of ``mixer.out_proj``, after the gated norm.

Ablating before the norm would be wrong: with ``n_groups=1`` the gated RMSNorm spans all
heads, so zeroing one head there rescales the others.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter, n_layers_of

if TYPE_CHECKING:
    from torch import nn


class Mamba2Adapter(Adapter):
    family = "mamba2"
    examples = "Mamba-2, Mamba-Codestral"
    model_types = ("mamba2",)
    builds = {"mamba2": "Mamba2Config"}

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        return [[("mamba2", cfg["num_heads"])]] * n_layers_of(cfg)

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        return dict(num_heads=heads * 2, head_dim=hidden * 2 // (heads * 2), state_size=8, expand=2,
                    n_groups=1, chunk_size=16, tie_word_embeddings=False)

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        return [Mixer(layer=i, kind="mamba2", n_heads=layer.mixer.num_heads, head_dim=layer.mixer.head_dim,
                      out_proj=layer.mixer.out_proj, out_proj_path=f"backbone.layers.{i}.mixer.out_proj", module=layer.mixer)
                for i, layer in enumerate(self.layers())]
