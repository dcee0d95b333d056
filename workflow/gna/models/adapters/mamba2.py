"""Mamba-2: heads at the input of ``mixer.out_proj``, after the gated norm.

Ablating before the norm would be wrong: with ``n_groups=1`` the gated RMSNorm spans all
heads, so zeroing one head there rescales the others.
"""
from __future__ import annotations

from torch import nn

from ..description import Mixer
from .base import Adapter


class Mamba2Adapter(Adapter):
    family = "mamba2"
    examples = "Mamba-2, Mamba-Codestral"
    model_types = ("mamba2",)

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        return [Mixer(layer=i, kind="mamba2", n_heads=layer.mixer.num_heads, head_dim=layer.mixer.head_dim,
                      out_proj=layer.mixer.out_proj, out_proj_path=f"backbone.layers.{i}.mixer.out_proj", module=layer.mixer)
                for i, layer in enumerate(self.layers())]
