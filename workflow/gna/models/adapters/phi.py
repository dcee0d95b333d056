"""Phi-1 / Phi-1.5 / Phi-2 (``PhiForCausalLM``): the attention output projection is ``self_attn.dense``.

``model.layers[i].self_attn.dense`` is an nn.Linear whose input is ``(..., n_heads * head_dim)``,
heads contiguous, exactly like Llama's ``o_proj``; attention and MLP run in parallel on the same
normed input and both add to the residual, so the attention output still enters the residual
only through ``dense``. (Phi-3 uses ``o_proj`` and goes to the generic attention adapter.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import UnknownArchitectureError
from ..description import Mixer
from .attention import AttentionAdapter
from .base import Adapter, other_token_mixers

if TYPE_CHECKING:
    from torch import nn


class PhiAdapter(Adapter):
    family = "phi"
    examples = "Phi-1, Phi-1.5, Phi-2 (self_attn.dense)"
    model_types = ("phi",)
    builds = {"phi": "PhiConfig"}

    # As for any attention decoder: one attention block per layer, the same tiny shape.
    layer_heads = AttentionAdapter.__dict__["layer_heads"]
    tiny_kwargs = AttentionAdapter.__dict__["tiny_kwargs"]

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg, out = self.model.config, []
        for i, layer in enumerate(self.layers()):
            attn = getattr(layer, "self_attn", None)
            others = other_token_mixers(layer, known=("self_attn",))
            if not hasattr(attn, "dense") or others:
                raise UnknownArchitectureError(f"Phi layer {i} is not one self_attn with a dense output projection"
                                               + (f"; other token mixers: {', '.join(others)}" if others else ""))
            out.append(Mixer(layer=i, kind="attention", n_heads=cfg.num_attention_heads, head_dim=attn.head_dim,
                             kv_heads=cfg.num_key_value_heads or cfg.num_attention_heads, out_proj=attn.dense,
                             out_proj_path=f"model.layers.{i}.self_attn.dense", module=attn))
        return out
