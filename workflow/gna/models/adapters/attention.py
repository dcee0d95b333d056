"""Attention decoders with ``model.layers[i].self_attn.o_proj`` (Llama, Qwen2, Mistral, OLMo, ...).

One file per shape: every family whose every decoder layer is one ``self_attn`` with an
``o_proj`` nn.Linear (input ``(..., n_heads * head_dim)``, heads contiguous) and no other token
mixer lands here, matched by structure rather than by model type. OLMo and OLMo-2
(``OlmoForCausalLM``, ``Olmo2ForCausalLM``) have this shape in transformers (their original
``att_proj`` / ``attn_out`` names exist only in the ``hf_olmo`` checkpoints).

A layer that has another token mixer beside ``self_attn`` (Falcon-H1's parallel Mamba-2
``mamba``), or a layer without ``self_attn`` (Jamba's, Granite-4.0-H's Mamba layers) is not this
shape: describing its attention alone would make every scan and ablation silently ignore the
other mixer, so such a model is refused (:meth:`refusal` says why) unless a family adapter
matched it first.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from ..refused import LINEAR_ATTENTION
from .base import Adapter, n_layers_of, other_token_mixers

if TYPE_CHECKING:
    from torch import nn


def _layers(model: nn.Module):
    from torch import nn

    layers = getattr(getattr(model, "model", None), "layers", None)
    return layers if isinstance(layers, nn.ModuleList) and len(layers) > 0 else None


class AttentionAdapter(Adapter):
    family = "attention"
    examples = "Llama, Qwen2, Qwen3, Mistral, Gemma, Phi-3, OLMo, OLMo-2"
    fallback = True
    builds = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "olmo": "OlmoConfig", "olmo2": "Olmo2Config"}

    @classmethod
    def matches_config(cls, cfg: dict) -> bool:
        return bool(n_layers_of(cfg)) and "num_attention_heads" in cfg

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        # Heterogeneous configs (Gemma-4, dots3) override settings per layer: {"05": {"head_dim": 512}}
        over = {int(k): v for k, v in (cfg.get("per_layer_config") or {}).items()}
        return [[("attention", over.get(i, {}).get("num_attention_heads", cfg["num_attention_heads"]))]
                for i in range(n_layers_of(cfg))]

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        kw = dict(num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=512,
                  tie_word_embeddings=False)
        if name in ("llama", "qwen2"):  # Qwen2: grouped-query attention, 2 query heads share one K/V
            kw["num_key_value_heads"] = max(1, heads // 2) if name == "qwen2" else heads
        return kw

    @classmethod
    def _problem(cls, layers) -> str | None:
        for i, layer in enumerate(layers):
            if not hasattr(getattr(layer, "self_attn", None), "o_proj"):
                return f"layer {i} ({type(layer).__name__}) has no self_attn.o_proj"
            if LINEAR_ATTENTION.search(type(layer.self_attn).__name__):
                return (f"layer {i}'s self_attn is {type(layer.self_attn).__name__}, a linear-attention (recurrent) "
                        f"mixer, not softmax attention")
            others = other_token_mixers(layer, known=("self_attn",))
            if others:
                return (f"layer {i} has token mixers besides self_attn that the attention adapter does not "
                        f"describe: {', '.join(others)}")
        return None

    @classmethod
    def matches(cls, model: nn.Module) -> bool:
        layers = _layers(model)
        return layers is not None and cls._problem(layers) is None

    @classmethod
    def refusal(cls, model: nn.Module) -> str | None:
        layers = _layers(model)
        # Only models that look like attention decoders (some layer has self_attn) get a reason.
        if layers is None or not any(getattr(l, "self_attn", None) is not None for l in layers):
            return None
        problem = cls._problem(layers)
        return None if problem is None else f"not a plain attention decoder: {problem}"

    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def mixers(self) -> list[Mixer]:
        out = []
        for i, layer in enumerate(self.layers()):
            cfg = _layer_config(self.model.config, i)
            n_heads = cfg.num_attention_heads
            # The projection's input is the heads' outputs side by side: its width / heads is the head
            # width, also where the value width differs from the query's (DeepSeek's MLA: v_head_dim).
            o_proj = layer.self_attn.o_proj
            width = getattr(o_proj, "in_features", None)
            head_dim = (width // n_heads if width and width % n_heads == 0 else
                        getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads)
            kv_heads = getattr(cfg, "num_key_value_heads", None) or n_heads
            out.append(Mixer(layer=i, kind="attention", n_heads=n_heads, head_dim=head_dim,
                             out_proj=layer.self_attn.o_proj, out_proj_path=f"model.layers.{i}.self_attn.o_proj",
                             kv_heads=kv_heads, module=layer.self_attn))
        return out


def _layer_config(cfg, i: int):
    """Layer ``i``'s settings: a heterogeneous config's per-layer view (Gemma-4: head_dim varies by
    layer, and reading it off the global config raises), else the config itself."""
    view = getattr(cfg, "per_layer_config", None)
    return view[i] if view is not None else cfg
