"""Nemotron-H (``NemotronHForCausalLM``, NVIDIA Nemotron-H / Nemotron-Nano-2): a stack of blocks,
each one ``mixer`` after a norm: Mamba-2, attention, an MLP or an MoE.

``model.layers[i].mixer`` is a ``NemotronHMamba2Mixer`` (``out_proj`` input ``(mamba_num_heads,
mamba_head_dim)`` after the gated RMSNorm), a ``NemotronHAttention`` (``o_proj`` input
``(num_attention_heads, head_dim)``), or a feed-forward block (no token mixing: the layer has no
mixer and no heads). ``config.layers_block_type`` says which. At most one token mixer per layer, so
``(layer, head)`` needs no kind; layer indices count every block, feed-forward ones included.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import UnknownArchitectureError
from ..description import Mixer
from .base import Adapter, _mixes_tokens

if TYPE_CHECKING:
    from torch import nn

ATTENTION, MAMBA = ("attention", "full_attention"), ("mamba", "linear_attention")
"""``config.layers_block_type`` entries of attention and of Mamba-2 blocks (older and newer names);
the others (``mlp``, ``moe``) are feed-forward."""


class NemotronHAdapter(Adapter):
    family = "nemotron-h"
    examples = "Nemotron-H-8B/47B/56B, Nemotron-Nano-9B-v2 (Mamba-2, attention and MLP blocks)"
    model_types = ("nemotron_h",)
    builds = {"nemotron-h": "NemotronHConfig"}

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        return [[("attention", cfg["num_attention_heads"])] if t in ATTENTION else
                [("mamba2", cfg["mamba_num_heads"])] if t in MAMBA else [] for t in cfg["layers_block_type"]]

    @classmethod
    def tiny_config(cls, name: str, vocab_size: int = 128, hidden: int = 32, layers: int = 2, heads: int = 4,
                    **overrides):
        # Mamba-2 then attention, repeated; a small MLP block after each pair from four layers on.
        blocks = (["mamba", "attention", "mlp"] * layers)[:layers] if layers > 2 else ["mamba", "attention"][:layers]
        kw = dict(vocab_size=vocab_size, hidden_size=hidden, layers_block_type=blocks, num_attention_heads=heads,
                  num_key_value_heads=max(1, heads // 2), head_dim=hidden // heads, intermediate_size=2 * hidden,
                  mamba_num_heads=hidden // 4, mamba_head_dim=8, n_groups=1, ssm_state_size=8, chunk_size=16,
                  expand=2, max_position_embeddings=512, tie_word_embeddings=False,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
        return cls.config_class(name)(**{**kw, **overrides})

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg, out = self.model.config, []
        for i, layer in enumerate(self.layers()):
            mixer, path = layer.mixer, f"model.layers.{i}.mixer"
            if hasattr(mixer, "o_proj"):
                out.append(Mixer(layer=i, kind="attention", n_heads=cfg.num_attention_heads, head_dim=mixer.head_dim,
                                 kv_heads=cfg.num_key_value_heads, out_proj=mixer.o_proj,
                                 out_proj_path=f"{path}.o_proj", module=mixer))
            elif hasattr(mixer, "A_log"):
                out.append(Mixer(layer=i, kind="mamba2", n_heads=mixer.num_heads, head_dim=mixer.head_dim,
                                 out_proj=mixer.out_proj, out_proj_path=f"{path}.out_proj", module=mixer))
            elif _mixes_tokens(mixer):
                raise UnknownArchitectureError(f"Nemotron-H layer {i}'s mixer {type(mixer).__name__} is neither "
                                               "attention, Mamba-2 nor a feed-forward block")
        return out
