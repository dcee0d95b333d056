"""Discrete Mamba-2 (Llamba), implemented in :mod:`gna.models.llamba`."""
from __future__ import annotations

from torch import nn

from ..description import Mixer
from .base import Adapter


class LlambaAdapter(Adapter):
    family = "llamba"
    examples = "Llamba-1B/3B/8B (cartesia-ai), MOHAWK students"
    model_types = ("llamba",)

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        return [Mixer(layer=i, kind="discrete-mamba2", n_heads=layer.mixer.n_heads, head_dim=layer.mixer.head_dim,
                      out_proj=layer.mixer.out_proj, out_proj_path=f"backbone.layers.{i}.mixer.out_proj", module=layer.mixer)
                for i, layer in enumerate(self.layers())]
