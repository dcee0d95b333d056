"""Random-init models of every supported family, for tests and benchmarks.

Real weights cannot be downloaded here, so tests build a tiny model of each family,
``save_pretrained`` it, and reload it through the same loader a Hugging Face model uses.
"""
from __future__ import annotations

import torch
import transformers as tf

FAMILIES = ("llama", "qwen2", "mamba1", "falcon-mamba", "mamba2", "zamba2", "llamba")
"""The paper's families (the micro study and the core tests run these)."""
MORE_FAMILIES = ("jamba", "falcon-h1", "granitemoehybrid", "gpt2", "olmo", "olmo2", "phi")
"""Further transformers families with an adapter (tests/test_families.py)."""
ALL_FAMILIES = FAMILIES + MORE_FAMILIES


def tiny_config(family: str, vocab_size: int = 128, hidden: int = 32, layers: int = 2,
                heads: int = 4, **overrides):
    """A small config of ``family``; ``overrides`` go to the config class verbatim."""
    common = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if family == "llama":
        kw = dict(num_attention_heads=heads, num_key_value_heads=heads,
                  intermediate_size=2 * hidden, max_position_embeddings=512, tie_word_embeddings=False)
        cls = tf.LlamaConfig
    elif family == "qwen2":  # grouped-query attention: 2 query heads share one K/V
        kw = dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                  intermediate_size=2 * hidden, max_position_embeddings=512, tie_word_embeddings=False)
        cls = tf.Qwen2Config
    elif family in ("mamba1", "falcon-mamba"):
        kw = dict(state_size=4, expand=2, conv_kernel=4, tie_word_embeddings=False)
        cls = tf.MambaConfig if family == "mamba1" else tf.FalconMambaConfig
    elif family == "mamba2":
        kw = dict(num_heads=heads * 2, head_dim=hidden * 2 // (heads * 2), state_size=8, expand=2,
                  n_groups=1, chunk_size=16, tie_word_embeddings=False)
        cls = tf.Mamba2Config
    elif family == "zamba2":
        blocks = ["mamba", "hybrid"] * max(1, layers // 2) + ["mamba"] * (layers % 2)
        kw = dict(layers_block_type=blocks, num_attention_heads=heads, num_key_value_heads=heads,
                  mamba_d_state=8, mamba_headdim=8, n_mamba_heads=hidden * 2 // 8, num_mem_blocks=1,
                  use_shared_attention_adapter=False, chunk_size=16, max_position_embeddings=512,
                  intermediate_size=2 * hidden)
        cls = tf.Zamba2Config
    elif family == "jamba":  # odd layers attention, even layers Mamba-1; MoE (2 small experts) on even layers
        kw = dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=2 * hidden,
                  attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=0,
                  num_experts=2, num_experts_per_tok=1, mamba_d_state=4, mamba_expand=2, mamba_dt_rank=4,
                  max_position_embeddings=512, tie_word_embeddings=False)
        cls = tf.JambaConfig
    elif family == "falcon-h1":  # attention (GQA) and Mamba-2 (heads of 8) in every layer
        kw = dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=2 * hidden,
                  mamba_d_ssm=2 * hidden, mamba_n_heads=hidden // 4, mamba_d_state=8, mamba_chunk_size=16,
                  max_position_embeddings=512, tie_word_embeddings=False)
        cls = tf.FalconH1Config
    elif family == "granitemoehybrid":  # Mamba-2 and attention layers alternating, 2 small experts
        kw = dict(num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), intermediate_size=hidden,
                  shared_intermediate_size=hidden, num_local_experts=2, num_experts_per_tok=1,
                  layer_types=(["mamba", "attention"] * layers)[:layers], mamba_n_heads=hidden // 4,
                  mamba_d_state=8, mamba_chunk_size=16, max_position_embeddings=512, tie_word_embeddings=False)
        cls = tf.GraniteMoeHybridConfig
    elif family == "gpt2":
        kw = dict(num_attention_heads=heads, n_positions=512)
        cls = tf.GPT2Config
    elif family in ("olmo", "olmo2", "phi"):
        kw = dict(num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=512,
                  tie_word_embeddings=False)
        cls = {"olmo": tf.OlmoConfig, "olmo2": tf.Olmo2Config, "phi": tf.PhiConfig}[family]
    elif family == "llamba":
        from .llamba import LlambaConfig
        return LlambaConfig.tiny(vocab_size=vocab_size, hidden=hidden, layers=layers, heads=heads,
                                 **overrides)
    else:
        raise ValueError(f"no tiny config for family {family!r}; known: {', '.join(ALL_FAMILIES)}")
    return cls(**{**common, **kw, **overrides})


def build_tiny_model(family: str, seed: int = 0, **config_kw) -> torch.nn.Module:
    """A random-init ``family`` model in eval mode; same seed, same weights."""
    torch.manual_seed(seed)
    config = tiny_config(family, **config_kw)
    model = tf.AutoModelForCausalLM.from_config(config)
    return model.eval()


@torch.no_grad()
def strengthen_llamba_mixers(model: torch.nn.Module) -> torch.nn.Module:
    """Give a random Llamba's mixers O(1) signals (in place, on a test model): with the 0.02
    init every path's output is tiny, so a wrong state, scan or cache would hardly change the
    logits; with these a mistake shows. Draws from torch's global generator."""
    for layer in model.backbone.layers:
        m = layer.mixer
        for lin in (m.in_proj, m.out_proj):
            lin.weight.normal_(0, lin.in_features ** -0.5)
        m.conv1d.weight.normal_(0, 0.5)
        m.D.uniform_(-1, 1)
        m.z_bias.normal_()
    return model
