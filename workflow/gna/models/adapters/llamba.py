"""Discrete Mamba-2 (Llamba), implemented in :mod:`gna.models.llamba`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from ..llamba_format import is_llamba_config
from .base import Adapter

if TYPE_CHECKING:
    from torch import nn


class LlambaAdapter(Adapter):
    family = "llamba"
    examples = "Llamba-1B/3B/8B (cartesia-ai), MOHAWK students"
    model_types = ("llamba",)
    builds = {"llamba": "LlambaConfig"}

    @classmethod
    def matches_config(cls, cfg: dict) -> bool:
        return is_llamba_config(cfg)

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        return [[("discrete-mamba2", cfg["ssm_cfg"]["n_v_heads"])]] * cfg["n_layer"]

    @classmethod
    def config_class(cls, name: str):
        from ..llamba import LlambaConfig

        return LlambaConfig

    @classmethod
    def tiny_config(cls, name: str, vocab_size: int = 128, hidden: int = 32, layers: int = 2, heads: int = 4,
                    **overrides):
        return cls.config_class(name).tiny(vocab_size=vocab_size, hidden=hidden, layers=layers, heads=heads,
                                           **overrides)

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        return [Mixer(layer=i, kind="discrete-mamba2", n_heads=layer.mixer.n_heads, head_dim=layer.mixer.head_dim,
                      out_proj=layer.mixer.out_proj, out_proj_path=f"backbone.layers.{i}.mixer.out_proj", module=layer.mixer)
                for i, layer in enumerate(self.layers())]
