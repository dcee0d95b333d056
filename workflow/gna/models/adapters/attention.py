"""Attention decoders with ``model.layers[i].self_attn.o_proj`` (Llama, Qwen2, Mistral, ...)."""
from __future__ import annotations

from torch import nn

from ..description import Mixer
from .base import Adapter


class AttentionAdapter(Adapter):
    family = "attention"
    examples = "Llama, Qwen2, Qwen3, Mistral, Gemma, Phi-3"

    @classmethod
    def matches(cls, model: nn.Module) -> bool:
        layers = getattr(getattr(model, "model", None), "layers", None)
        return (isinstance(layers, nn.ModuleList) and len(layers) > 0
                and hasattr(getattr(layers[0], "self_attn", None), "o_proj"))

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        cfg = self.model.config
        n_heads = cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or n_heads
        return [Mixer(layer=i, kind="attention", n_heads=n_heads, head_dim=head_dim,
                      out_proj=layer.self_attn.o_proj, out_proj_path=f"model.layers.{i}.self_attn.o_proj",
                      kv_heads=kv_heads, module=layer.self_attn)
                for i, layer in enumerate(self.layers())]
