"""Mamba-1 and Falcon-Mamba: a head is a group of ``channel_group`` inner channels.

The paper treats each inner channel as a head (Falcon-Mamba-7B: 8192 x 1); grouping
channels makes a coarser, cheaper scan for small models.
"""
from __future__ import annotations

from torch import nn

from ...errors import ConfigError
from ..description import Mixer
from .base import Adapter


def divisors(n: int, shown: int = 12) -> str:
    """The divisors of ``n``, the first ``shown`` of them, as text: the valid channel groups."""
    ds = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(map(str, ds[:shown])) + (", ..." if len(ds) > shown else "")


class Mamba1Adapter(Adapter):
    family = "mamba1"
    examples = "Mamba, Falcon-Mamba"
    model_types = ("mamba", "falcon_mamba")

    def __init__(self, model: nn.Module, channel_group: int = 1):
        self.model = model
        d_inner = model.config.intermediate_size
        # Checked when the adapter is attached (at load, before any describe() or scan): a group
        # that does not divide the channels would silently drop the last channels from every head.
        if not isinstance(channel_group, int) or channel_group < 1 or d_inner % channel_group:
            raise ConfigError(f"adapter_options.channel_group = {channel_group!r} must be a positive divisor of "
                              f"the Mamba inner width {d_inner} (config.json intermediate_size); divisors: "
                              f"{divisors(d_inner)}")
        self.channel_group = channel_group

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        d_inner, g = self.model.config.intermediate_size, self.channel_group
        return [Mixer(layer=i, kind="mamba1", n_heads=d_inner // g, head_dim=g,
                      out_proj=layer.mixer.out_proj, out_proj_path=f"backbone.layers.{i}.mixer.out_proj", module=layer.mixer)
                for i, layer in enumerate(self.layers())]
