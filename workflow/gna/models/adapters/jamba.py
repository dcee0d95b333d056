"""Jamba (``JambaForCausalLM``): attention and Mamba-1 layers interleaved, MoE MLPs.

``model.layers[i]`` is either a ``JambaAttentionDecoderLayer`` (``self_attn.o_proj``, heads
``(num_attention_heads, head_dim)``) or a ``JambaMambaDecoderLayer`` (``mamba.out_proj``, whose
input is the gated selective-scan output, ``(..., mamba_expand * hidden_size)`` channels). As for
Mamba-1, a Mamba head is a group of ``channel_group`` inner channels (1 = the paper's per-channel
heads). The MoE feed-forward does not mix tokens and is not described. Each layer has exactly one
token mixer, so ``(layer, head)`` needs no kind.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import UnknownArchitectureError
from ..description import Mixer
from .base import Adapter, n_layers_of, other_token_mixers
from .mamba1 import channel_heads

if TYPE_CHECKING:
    from torch import nn


class JambaAdapter(Adapter):
    family = "jamba"
    examples = "Jamba-v0.1, Jamba-1.5 (attention + Mamba-1 layers, MoE)"
    model_types = ("jamba",)

    builds = {"jamba": "JambaConfig"}
    WIDTH = "Jamba: config.json mamba_expand x hidden_size"

    def __init__(self, model: nn.Module, channel_group: int = 1):
        self.model = model
        channel_heads(model.config.mamba_expand * model.config.hidden_size, channel_group, self.WIDTH)
        self.channel_group = channel_group

    @classmethod
    def layer_heads(cls, cfg: dict, channel_group: int = 1) -> list[list[tuple[str, int]]]:
        mamba = channel_heads(cfg["mamba_expand"] * cfg["hidden_size"], channel_group, cls.WIDTH)
        return [[("attention", cfg["num_attention_heads"])] if i % cfg["attn_layer_period"] == cfg["attn_layer_offset"]
                else [("mamba1", mamba)] for i in range(n_layers_of(cfg))]

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        # odd layers attention, even layers Mamba-1; MoE (2 small experts) on even layers
        return dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=2 * hidden,
                    attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=0,
                    num_experts=2, num_experts_per_tok=1, mamba_d_state=4, mamba_expand=2, mamba_dt_rank=4,
                    max_position_embeddings=512, tie_word_embeddings=False)

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg, g, out = self.model.config, self.channel_group, []
        for i, layer in enumerate(self.layers()):
            attn, mamba = getattr(layer, "self_attn", None), getattr(layer, "mamba", None)
            others = other_token_mixers(layer, known=("self_attn", "mamba"))
            if (attn is None) == (mamba is None) or others:
                raise UnknownArchitectureError(
                    f"Jamba layer {i} ({type(layer).__name__}) is neither one self_attn nor one mamba mixer"
                    + (f"; other token mixers: {', '.join(others)}" if others else ""))
            if attn is not None:
                out.append(Mixer(layer=i, kind="attention", n_heads=cfg.num_attention_heads, head_dim=attn.head_dim,
                                 kv_heads=cfg.num_key_value_heads, out_proj=attn.o_proj,
                                 out_proj_path=f"model.layers.{i}.self_attn.o_proj", module=attn))
            else:
                out.append(Mixer(layer=i, kind="mamba1", n_heads=mamba.intermediate_size // g, head_dim=g,
                                 out_proj=mamba.out_proj, out_proj_path=f"model.layers.{i}.mamba.out_proj",
                                 module=mamba))
        return out
