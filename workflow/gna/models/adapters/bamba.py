"""Bamba (``BambaForCausalLM``, IBM Bamba-9B): Mamba-2 layers with attention at some depths.

``model.layers[i]`` has either ``mamba`` (``BambaMixer``, a Mamba-2 mixer: ``out_proj`` input
``(mamba_n_heads, mamba_d_head)`` after the gated RMSNorm) or ``self_attn`` (``o_proj`` input
``(num_attention_heads, head_dim)``); ``config.attn_layer_indices`` lists the attention layers. One
token mixer per layer, so ``(layer, head)`` needs no kind. The feed-forward does not mix tokens.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import UnknownArchitectureError
from ..description import Mixer
from .base import Adapter, n_layers_of, other_token_mixers

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
    def structure(cls, cfg: dict, **options) -> tuple[int, int]:
        per_layer = cls.layer_heads(cfg, **options)
        return len(per_layer), sum(n for layer in per_layer for _, n in layer)

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
        cfg, out = self.model.config, []
        for i, layer in enumerate(self.layers()):
            attn, mamba = getattr(layer, "self_attn", None), getattr(layer, "mamba", None)
            others = other_token_mixers(layer, known=("self_attn", "mamba"))
            if (attn is None) == (mamba is None) or others:
                raise UnknownArchitectureError(
                    f"Bamba layer {i} is neither one self_attn nor one mamba mixer"
                    + (f"; other token mixers: {', '.join(others)}" if others else ""))
            path = f"model.layers.{i}"
            if attn is not None:
                out.append(Mixer(layer=i, kind="attention", n_heads=cfg.num_attention_heads, head_dim=attn.head_dim,
                                 kv_heads=cfg.num_key_value_heads, out_proj=attn.o_proj,
                                 out_proj_path=f"{path}.self_attn.o_proj", module=attn))
            else:
                out.append(Mixer(layer=i, kind="mamba2", n_heads=mamba.num_heads, head_dim=mamba.head_dim,
                                 out_proj=mamba.out_proj, out_proj_path=f"{path}.mamba.out_proj", module=mamba))
        return out
