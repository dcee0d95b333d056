"""Zamba2: Mamba-2 layers plus a shared attention block invoked from the hybrid layers.

The shared block's weights are one tensor across invocations, so zeroing weights would
ablate a head everywhere. Each invocation is its own mixer here, bracketed by its hybrid
layer's forward, so a hook ablates (invocation layer, head) alone.
"""
from __future__ import annotations

from torch import nn

from ..description import Mixer
from .base import Adapter


class Zamba2Adapter(Adapter):
    family = "zamba2"
    examples = "Zamba2-1.2B, Zamba2-2.7B, Zamba2-7B"
    model_types = ("zamba2",)

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
