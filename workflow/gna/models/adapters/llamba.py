"""Discrete Mamba-2 (Llamba), implemented in :mod:`gna.models.llamba`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter

if TYPE_CHECKING:
    from torch import nn


def is_llamba_config(config: dict) -> bool:
    """Whether a ``config.json`` dict is in the Llamba / discrete Mamba-2 published format.

    ``model_type == "llamba"`` suffices; otherwise the fields decide (cartesia-ai's own config.json
    files name no model_type): ``d_model``, ``n_layer``, an ``mlp_cfg`` and an ``ssm_cfg`` naming
    ``n_v_heads``/``n_qk_heads`` (mamba_ssm's own configs have ``ssm_cfg`` but neither ``mlp_cfg``
    nor qk/v heads).
    """
    if not isinstance(config, dict):
        return False
    if config.get("model_type") == "llamba":
        return True
    ssm, mlp = config.get("ssm_cfg"), config.get("mlp_cfg")
    return (all(k in config for k in ("d_model", "n_layer", "vocab_size"))
            and isinstance(ssm, dict) and ("n_v_heads" in ssm or "n_qk_heads" in ssm)
            and isinstance(mlp, dict) and "intermediate_size" in mlp)


class LlambaAdapter(Adapter):
    family = "llamba"
    examples = "Llamba-1B/3B/8B (cartesia-ai), MOHAWK students"
    model_types = ("llamba",)
    builds = {"llamba": "LlambaConfig"}

    @classmethod
    def matches_config(cls, cfg: dict) -> bool:
        return is_llamba_config(cfg)

    @classmethod
    def structure(cls, cfg: dict, **options) -> tuple[int, int]:
        cls.check_options(options)
        return cfg["n_layer"], cfg["n_layer"] * cfg["ssm_cfg"]["n_v_heads"]

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
