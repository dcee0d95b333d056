"""Config of Llamba / discrete Mamba-2 language models, in the published ``config.json`` format.

The published checkpoints (cartesia-ai/Llamba-1B/3B/8B) store, e.g. for Llamba-3B::

    {"model_type": "llamba", "vocab_size": 128256, "tie_embeddings": true,
     "pad_vocab_size_multiple": 8, "lm_head_bias": false, "d_model": 3072, "n_layer": 28,
     "resid_dropout": 0.0, "norm_epsilon": 1e-5,
     "mlp_cfg": {"intermediate_size": 8192, "bias": false, "act_fn": "silu"},
     "ssm_cfg": {"d_state": 64, "n_v_heads": 32, "n_qk_heads": 32, "expand": 1,
                 "chunk_size": 128, "activation": "identity", "bias": false}}

Those names are the fields here, so ``save_pretrained`` writes the same format back; the
standard transformers names (``hidden_size``...) are aliases via ``attribute_map``.
"""
from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

# Defaults of cartesia_pytorch.Llamba.mixers.discrete_mamba2.DiscreteMamba2.__init__; the published
# ssm_cfg omits d_conv and conv_bias, so these defaults are part of the published format.
SSM_DEFAULTS = dict(d_state=64, n_v_heads=32, n_qk_heads=32, d_conv=4, expand=1, chunk_size=128,
                    activation="identity", bias=False, conv_bias=True)
MLP_DEFAULTS = dict(intermediate_size=14336, bias=False, act_fn="silu")


@strict
class LlambaConfig(PreTrainedConfig):
    """Defaults are Llamba-8B's shape with the Llama-3 tokenizer's special ids; see :meth:`tiny`."""

    model_type = "llamba"
    attribute_map = {"hidden_size": "d_model", "num_hidden_layers": "n_layer",
                     "tie_word_embeddings": "tie_embeddings", "rms_norm_eps": "norm_epsilon"}

    vocab_size: int = 128256
    d_model: int = 4096
    n_layer: int = 32
    tie_embeddings: bool = False
    pad_vocab_size_multiple: int = 8
    lm_head_bias: bool = False
    resid_dropout: float = 0.0  # in the published format; unused by the reference forward too
    norm_epsilon: float = 1e-5
    mlp_cfg: dict | None = None
    ssm_cfg: dict | None = None
    initializer_range: float = 0.02
    bos_token_id: int | None = 128000
    eos_token_id: int | list[int] | None = 128001
    pad_token_id: int | None = None
    # generate()'s default stays off (saved configs unchanged); use_cache=True, which lm-eval's
    # generate_until passes, carries a LlambaCache: O(1) per new token in the SSM layers
    use_cache: bool = False

    def __post_init__(self, **kwargs):
        # Spell every mixer/MLP option out, so a saved config does not depend on code defaults.
        self.ssm_cfg = {**SSM_DEFAULTS, **(self.ssm_cfg or {})}
        self.mlp_cfg = {**MLP_DEFAULTS, **(self.mlp_cfg or {})}
        super().__post_init__(**kwargs)

    @property
    def padded_vocab_size(self) -> int:
        """Rows of the embedding and of the LM head: ``vocab_size`` rounded up as the reference does."""
        m = self.pad_vocab_size_multiple
        return -(-self.vocab_size // m) * m

    @classmethod
    def tiny(cls, vocab_size: int = 128, hidden: int = 32, layers: int = 2, heads: int = 4,
             d_state: int = 8, chunk_size: int = 16, **overrides) -> "LlambaConfig":
        """A test-sized config; ``overrides`` are config fields (``ssm_cfg`` entries merge)."""
        ssm = dict(d_state=d_state, n_v_heads=heads, n_qk_heads=heads, expand=1, chunk_size=chunk_size,
                   activation="identity", bias=False)
        ssm.update(overrides.pop("ssm_cfg", None) or {})
        mlp = dict(intermediate_size=2 * hidden, bias=False, act_fn="silu")
        mlp.update(overrides.pop("mlp_cfg", None) or {})
        kw = dict(vocab_size=vocab_size, d_model=hidden, n_layer=layers, ssm_cfg=ssm, mlp_cfg=mlp,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
        return cls(**{**kw, **overrides})

    @classmethod
    def from_published(cls, config: dict, **overrides) -> "LlambaConfig":
        """Build from a published-format dict, whatever its ``model_type`` (absent, or another)."""
        fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "auto_map")}
        return cls(**{**fields, **overrides})
