"""Bamba (``BambaForCausalLM``, IBM Bamba-9B): Mamba-2 layers with attention at some depths.

``model.layers[i]`` has either ``mamba`` (``BambaMixer``, a Mamba-2 mixer: ``out_proj`` input
``(mamba_n_heads, mamba_d_head)`` after the gated RMSNorm) or ``self_attn`` (``o_proj`` input
``(num_attention_heads, head_dim)``); ``config.attn_layer_indices`` lists the attention layers. One
token mixer per layer, so ``(layer, head)`` needs no kind. The feed-forward does not mix tokens.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter, interleaved_mixers, n_layers_of

if TYPE_CHECKING:
    from torch import nn


class BambaAdapter(Adapter):
    family = "bamba"
    examples = "Bamba-9B (Mamba-2 layers, attention at a few depths)"
    model_types = ("bamba",)
    builds = {"bamba": "BambaConfig"}
    layer_returns_tuple = 2  # the model loop unpacks (hidden, attention weights)

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        attn = set(cfg.get("attn_layer_indices") or [])
        return [[("attention", cfg["num_attention_heads"])] if i in attn else [("mamba2", cfg["mamba_n_heads"])]
                for i in range(n_layers_of(cfg))]

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        # Mamba-2 at even layers, attention at odd ones (heads of 8 in both)
        return dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=2 * hidden,
                    attn_layer_indices=list(range(1, layers, 2)), mamba_n_heads=hidden // 4, mamba_d_head=8,
                    mamba_n_groups=1, mamba_d_state=8, mamba_chunk_size=16, mamba_expand=2,
                    max_position_embeddings=512, tie_word_embeddings=False)

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        return interleaved_mixers(self.layers(), self.model.config, "Bamba")
