"""GPT-2 (``GPT2LMHeadModel``): ``transformer.h[i].attn.c_proj`` is a ``Conv1D``.

Conv1D stores its weight as ``(in_features, out_features)`` and computes ``x @ W + b``, so a
head's slice of the projection input ``(..., n_head * head_dim)`` meets *rows*
``h * head_dim:(h + 1) * head_dim`` of ``c_proj.weight`` (the columns of an nn.Linear). The hooks
act on the input and do not care; code that edits weights must use rows here. No grouped-query
attention (``kv_heads == n_head``). Models built with ``add_cross_attention`` (decoders of
encoder-decoder pairs) have a second, cross-attention mixer per layer and are refused.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter, other_token_mixers

if TYPE_CHECKING:
    from torch import nn


class GPT2Adapter(Adapter):
    family = "gpt2"
    examples = "GPT-2 small/medium/large/XL, DistilGPT2 (Conv1D c_proj)"
    model_types = ("gpt2",)
    builds = {"gpt2": "GPT2Config"}

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]]:
        cls.check_options(options)
        return [[("attention", cfg["n_head"])]] * cfg["n_layer"]

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict:
        return dict(num_attention_heads=heads, n_positions=512)

    @classmethod
    def matches(cls, model: nn.Module) -> bool:
        return super().matches(model) and cls.refusal(model) is None

    @classmethod
    def refusal(cls, model: nn.Module) -> str | None:
        if getattr(model.config, "model_type", None) not in cls.model_types:
            return None
        if getattr(model.config, "add_cross_attention", False):
            return "GPT-2 with add_cross_attention has a cross-attention mixer per layer, which gna does not describe"
        from torch import nn

        h = getattr(getattr(model, "transformer", None), "h", None)
        if not isinstance(h, nn.ModuleList) or not all(hasattr(getattr(b, "attn", None), "c_proj") for b in h):
            return "not a GPT2LMHeadModel layout (transformer.h[i].attn.c_proj)"
        for i, block in enumerate(h):
            others = other_token_mixers(block, known=("attn",))
            if others:
                return f"GPT-2 block {i} has token mixers besides attn: {', '.join(others)}"
        return None

    def layers(self) -> nn.ModuleList:
        return self.model.transformer.h

    def mixers(self) -> list[Mixer]:
        cfg = self.model.config
        return [Mixer(layer=i, kind="attention", n_heads=cfg.n_head, head_dim=block.attn.head_dim,
                      kv_heads=cfg.n_head, out_proj=block.attn.c_proj,
                      out_proj_path=f"transformer.h.{i}.attn.c_proj", module=block.attn)
                for i, block in enumerate(self.layers())]
