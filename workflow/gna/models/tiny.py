"""Random-init models of every supported family, for tests and benchmarks.

Real weights cannot be downloaded here, so tests build a tiny model of each family,
``save_pretrained`` it, and reload it through the same loader a Hugging Face model uses. What a
tiny model of a family looks like is written in the family's adapter (``builds``,
``tiny_kwargs``); this module only collects them.
"""
from __future__ import annotations

from .adapters import ADAPTERS, builder_of

FAMILIES = ("llama", "qwen2", "mamba1", "falcon-mamba", "mamba2", "zamba2", "llamba")
"""The paper's families (the micro study and the core tests run these)."""
ALL_FAMILIES = FAMILIES + tuple(sorted(n for a in ADAPTERS for n in a.builds if n not in FAMILIES))
"""Every model an adapter can build."""
MORE_FAMILIES = ALL_FAMILIES[len(FAMILIES):]
"""Further transformers families with an adapter (tests/test_families.py)."""


def config_class(name: str):
    """The config class of a buildable ``name`` (``llama`` -> transformers.LlamaConfig)."""
    return builder_of(name).config_class(name)


def tiny_config(family: str, vocab_size: int = 128, hidden: int = 32, layers: int = 2,
                heads: int = 4, **overrides):
    """A small config of ``family``; ``overrides`` go to the config class verbatim."""
    return builder_of(family).tiny_config(family, vocab_size=vocab_size, hidden=hidden, layers=layers,
                                          heads=heads, **overrides)


def build_tiny_model(family: str, seed: int = 0, **config_kw):
    """A random-init ``family`` model in eval mode; same seed, same weights."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    config = tiny_config(family, **config_kw)
    model = tf.AutoModelForCausalLM.from_config(config)
    return model.eval()


def strengthen_llamba_mixers(model):
    """Give a random Llamba's mixers O(1) signals (in place, on a test model): with the 0.02
    init every path's output is tiny, so a wrong state, scan or cache would hardly change the
    logits; with these a mistake shows. Draws from torch's global generator."""
    import torch

    with torch.no_grad():
        for layer in model.backbone.layers:
            m = layer.mixer
            for lin in (m.in_proj, m.out_proj):
                lin.weight.normal_(0, lin.in_features ** -0.5)
            m.conv1d.weight.normal_(0, 0.5)
            m.D.uniform_(-1, 1)
            m.z_bias.normal_()
    return model
