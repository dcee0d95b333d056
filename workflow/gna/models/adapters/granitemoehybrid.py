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

from torch import nn

from ...errors import UnknownArchitectureError
from ..description import Mixer
from .base import Adapter, other_token_mixers


class GraniteMoeHybridAdapter(Adapter):
    family = "granitemoehybrid"
    examples = "Granite-4.0-H-Micro/Tiny/Small (Mamba-2 + attention layers, MoE)"
    model_types = ("granitemoehybrid",)

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg, out = self.model.config, []
        for i, layer in enumerate(self.layers()):
            attn, mamba = getattr(layer, "self_attn", None), getattr(layer, "mamba", None)
            others = other_token_mixers(layer, known=("self_attn", "mamba"))
            if (attn is None) == (mamba is None) or others:
                raise UnknownArchitectureError(
                    f"GraniteMoeHybrid layer {i} is neither one self_attn nor one mamba mixer"
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
