"""GraniteMoeHybrid (``GraniteMoeHybridForCausalLM``, IBM Granite-4.0-H): Mamba-2 and attention
layers interleaved, MoE plus a shared MLP in every layer.

``model.layers[i]`` has either ``mamba`` (a Mamba-2 mixer, ``out_proj`` input ``(mamba_n_heads,
mamba_d_head)`` after the gated RMSNorm) or ``self_attn`` (``o_proj`` input ``(num_attention_heads,
head_dim)``); the other attribute is None. ``config.layer_types`` says which ("mamba" /
"linear_attention" vs "attention" / "full_attention"). One token mixer per layer, so
``(layer, head)`` needs no kind. The residual multiplier scales the mixer output after its
projection, which leaves head ablation at the projection input exact.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter, interleaved_mixers, n_layers_of

if TYPE_CHECKING:
    from torch import nn


class GraniteMoeHybridAdapter(Adapter):
    family = "granitemoehybrid"
    examples = "Granite-4.0-H-Micro/Tiny/Small (Mamba-2 + attention layers, MoE)"
    model_types = ("granitemoehybrid",)
    builds = {"granitemoehybrid": "GraniteMoeHybridConfig"}
    ATTENTION_TYPES = ("attention", "full_attention")
    """``config.layer_types`` entries of attention layers; every other entry is a Mamba-2 layer."""

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        # no layer_types: transformers makes every layer "linear_attention", a Mamba-2 layer here
        types = cfg.get("layer_types") or ["linear_attention"] * n_layers_of(cfg)
        return [[("attention", cfg["num_attention_heads"])] if t in cls.ATTENTION_TYPES else
                [("mamba2", cfg["mamba_n_heads"])] for t in types]

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        # Mamba-2 and attention layers alternating, 2 small experts
        return dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=hidden,
                    shared_intermediate_size=hidden, num_local_experts=2, num_experts_per_tok=1,
                    layer_types=(["mamba", "attention"] * layers)[:layers], mamba_n_heads=hidden // 4,
                    mamba_d_state=8, mamba_chunk_size=16, max_position_embeddings=512, tie_word_embeddings=False)

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        return interleaved_mixers(self.layers(), self.model.config, "GraniteMoeHybrid")
