"""Zamba2: Mamba-2 layers plus a shared attention block invoked from the hybrid layers.

The shared block's weights are one tensor across invocations, so zeroing weights would
ablate a head everywhere. Each invocation is its own mixer here, bracketed by its hybrid
layer's forward, so a hook ablates (invocation layer, head) alone.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter

if TYPE_CHECKING:
    from torch import nn


class Zamba2Adapter(Adapter):
    family = "zamba2"
    examples = "Zamba2-1.2B, Zamba2-2.7B, Zamba2-7B"
    model_types = ("zamba2",)
    builds = {"zamba2": "Zamba2Config"}

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        # a "hybrid" layer invokes the shared attention block, then its own Mamba-2
        return [([("attention", cfg["num_attention_heads"])] if t == "hybrid" else []) + [("mamba2", cfg["n_mamba_heads"])]
                for t in cfg["layers_block_type"]]

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        blocks = ["mamba", "hybrid"] * max(1, layers // 2) + ["mamba"] * (layers % 2)
        return dict(layers_block_type=blocks, num_attention_heads=heads, num_key_value_heads=heads,
                    mamba_d_state=8, mamba_headdim=8, n_mamba_heads=hidden * 2 // 8, num_mem_blocks=1,
                    use_shared_attention_adapter=False, chunk_size=16, max_position_embeddings=512,
                    intermediate_size=2 * hidden)

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg, out = self.model.config, []
        for i, layer in enumerate(self.layers()):
            if hasattr(layer, "shared_transformer"):
                out.append(Mixer(
                    layer=i, kind="attention", n_heads=cfg.num_attention_heads,
                    head_dim=cfg.attention_head_dim, kv_heads=cfg.num_key_value_heads,
                    out_proj=layer.shared_transformer.self_attn.o_proj,
                    out_proj_path=f"model.layers.{i}.shared_transformer.self_attn.o_proj",
                    invocation=layer, module=layer.shared_transformer.self_attn))
                mamba, path = layer.mamba_decoder.mamba, f"model.layers.{i}.mamba_decoder.mamba"
            else:
                mamba, path = layer.mamba, f"model.layers.{i}.mamba"
            out.append(Mixer(layer=i, kind="mamba2", n_heads=mamba.num_heads, head_dim=mamba.head_dim,
                             out_proj=mamba.out_proj, out_proj_path=f"{path}.out_proj",
                             module=mamba))
        return out
