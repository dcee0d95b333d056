"""Jamba (``JambaForCausalLM``): attention and Mamba-1 layers interleaved, MoE MLPs.

``model.layers[i]`` is either a ``JambaAttentionDecoderLayer`` (``self_attn.o_proj``, heads
``(num_attention_heads, head_dim)``) or a ``JambaMambaDecoderLayer`` (``mamba.out_proj``, whose
input is the gated selective-scan output, ``(..., mamba_expand * hidden_size)`` channels). As for
Mamba-1, a Mamba head is a group of ``channel_group`` inner channels (1 = the paper's per-channel
heads). The MoE feed-forward does not mix tokens and is not described. Each layer has exactly one
token mixer, so ``(layer, head)`` needs no kind.
"""
from __future__ import annotations

from torch import nn

from ...errors import ConfigError, UnknownArchitectureError
from ..description import Mixer
from .base import Adapter, other_token_mixers


class JambaAdapter(Adapter):
    family = "jamba"
    examples = "Jamba-v0.1, Jamba-1.5 (attention + Mamba-1 layers, MoE)"
    model_types = ("jamba",)

    def __init__(self, model: nn.Module, channel_group: int = 1):
        self.model = model
        d_inner = model.config.mamba_expand * model.config.hidden_size
        if not isinstance(channel_group, int) or channel_group < 1 or d_inner % channel_group:
            raise ConfigError(f"channel_group={channel_group!r} must be a positive divisor of the "
                              f"Jamba Mamba inner width {d_inner}")
        self.channel_group = channel_group

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
