"""Mamba-1 and Falcon-Mamba: a head is a group of ``channel_group`` inner channels.

The paper treats each inner channel as a head (Falcon-Mamba-7B: 8192 x 1); grouping
channels makes a coarser, cheaper scan for small models.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import ConfigError
from ..description import Mixer
from .base import Adapter, n_layers_of

if TYPE_CHECKING:
    from torch import nn


def divisors(n: int, shown: int = 12) -> str:
    """The divisors of ``n``, the first ``shown`` of them, as text: the valid channel groups."""
    ds = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(map(str, ds[:shown])) + (", ..." if len(ds) > shown else "")


def channel_heads(width: int, group, where: str) -> int:
    """The heads of a Mamba-1 mixer of ``width`` inner channels, ``group`` channels per head.

    Checked from the config when the workflow is parsed and again when the adapter is attached: a
    group that does not divide the channels would silently drop the last channels from every head.
    """
    if not isinstance(group, int) or isinstance(group, bool) or group < 1 or width % group:
        raise ConfigError(f"adapter_options.channel_group = {group!r} does not divide the Mamba inner width {width} "
                          f"({where}); divisors: {divisors(width)}")
    return width // group


class Mamba1Adapter(Adapter):
    family = "mamba1"
    examples = "Mamba, Falcon-Mamba"
    model_types = ("mamba", "falcon_mamba")
    builds = {"mamba1": "MambaConfig", "falcon-mamba": "FalconMambaConfig"}
    WIDTH = "config.json intermediate_size"

    def __init__(self, model: nn.Module, channel_group: int = 1):
        self.model = model
        channel_heads(model.config.intermediate_size, channel_group, self.WIDTH)
        self.channel_group = channel_group

    @classmethod
    def layer_heads(cls, cfg: dict, channel_group: int = 1) -> list[list[tuple[str, int]]]:
        return [[("mamba1", channel_heads(cfg["intermediate_size"], channel_group, cls.WIDTH))]] * n_layers_of(cfg)

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        return dict(state_size=4, expand=2, conv_kernel=4, tie_word_embeddings=False)

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        d_inner, g = self.model.config.intermediate_size, self.channel_group
        return [Mixer(layer=i, kind="mamba1", n_heads=d_inner // g, head_dim=g,
                      out_proj=layer.mixer.out_proj, out_proj_path=f"backbone.layers.{i}.mixer.out_proj", module=layer.mixer)
                for i, layer in enumerate(self.layers())]
