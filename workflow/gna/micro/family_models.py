"""The micro models themselves: each family's transformers config and a freshly seeded model.

A family's size comes from its recipe (:func:`gna.micro.recipes.family_preset`), with the caller's overrides
and the tokenizer's vocabulary on top; the config classes are those the family's adapter names
(``builds``: ``llama`` -> ``LlamaConfig``, ``mamba1`` -> ``MambaConfig``, ...), transformers' own, so a
saved model loads with ``AutoModelForCausalLM``.
"""
from __future__ import annotations

import torch

from ..models.tiny import config_class
from .recipes import family_preset


def model_config(family: str, overrides: dict | None, vocab_size: int, bos_id: int = 1, eos_id: int = 2,
                 pad_id: int = 0):
    """The transformers config of ``family``: preset, then ``overrides``, then the vocabulary."""
    kw = {**family_preset(family)["model"], **(overrides or {})}
    cls = config_class(family)
    if family == "zamba2" and "layers_block_type" in kw:
        kw["num_hidden_layers"] = len(kw["layers_block_type"])
    kw.update(vocab_size=vocab_size, bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return cls(**kw)


def build_model(family: str, overrides: dict | None, vocab_size: int, seed: int = 0) -> torch.nn.Module:
    """A freshly initialised model of ``family`` (same seed, same weights)."""
    from transformers import AutoModelForCausalLM
    config = model_config(family, overrides, vocab_size)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
