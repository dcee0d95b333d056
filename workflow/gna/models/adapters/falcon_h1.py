"""Falcon-H1 (``FalconH1ForCausalLM``): every layer runs attention AND a Mamba-2 mixer in parallel.

``model.layers[i]`` has ``self_attn`` (``o_proj`` input: heads ``(num_attention_heads,
head_dim)``) and ``mamba`` (a Mamba-2 mixer; ``out_proj`` input: ``(mamba_n_heads,
mamba_d_head)``, after the optional gated RMSNorm, so one head's ablation does not rescale the
others). Both outputs are scaled (``attention_out_multiplier``, ``ssm_out_multiplier``) after
their output projection and summed into the residual. Every layer therefore has two mixers:
name the kind, ``(layer, head, "attention")`` or ``(layer, head, "mamba2")``.

The decoder layer returns ``(hidden,)`` and the model reads ``layer_outputs[0]``, so a skipped
layer must return a tuple too (``layer_returns_tuple``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import UnknownArchitectureError
from ..description import Mixer
from .base import Adapter, n_layers_of, other_token_mixers

if TYPE_CHECKING:
    from torch import nn


class FalconH1Adapter(Adapter):
    family = "falcon-h1"
    examples = "Falcon-H1-0.5B ... 34B (parallel attention + Mamba-2 in every layer)"
    model_types = ("falcon_h1",)
    layer_returns_tuple = True
    builds = {"falcon-h1": "FalconH1Config"}

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        return [[("attention", cfg["num_attention_heads"]), ("mamba2", cfg["mamba_n_heads"])]] * n_layers_of(cfg)

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        # attention (GQA) and Mamba-2 (heads of 8) in every layer
        return dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=2 * hidden,
                    mamba_d_ssm=2 * hidden, mamba_n_heads=hidden // 4, mamba_d_state=8, mamba_chunk_size=16,
                    max_position_embeddings=512, tie_word_embeddings=False)

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg, out = self.model.config, []
        for i, layer in enumerate(self.layers()):
            attn, mamba = getattr(layer, "self_attn", None), getattr(layer, "mamba", None)
            others = other_token_mixers(layer, known=("self_attn", "mamba"))
            if attn is None or mamba is None or others:
                raise UnknownArchitectureError(
                    f"Falcon-H1 layer {i} ({type(layer).__name__}) does not have exactly self_attn + mamba"
                    + (f"; other token mixers: {', '.join(others)}" if others else ""))
            path = f"model.layers.{i}"
            out.append(Mixer(layer=i, kind="attention", n_heads=cfg.num_attention_heads, head_dim=attn.head_dim,
                             kv_heads=cfg.num_key_value_heads, out_proj=attn.o_proj,
                             out_proj_path=f"{path}.self_attn.o_proj", module=attn))
            out.append(Mixer(layer=i, kind="mamba2", n_heads=mamba.num_heads, head_dim=mamba.head_dim,
                             out_proj=mamba.out_proj, out_proj_path=f"{path}.mamba.out_proj", module=mamba))
        return out
