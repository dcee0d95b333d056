"""The retrieval-aware hybrid student: a Llamba whose layers may keep a few teacher attention heads.

Layout (``model_type="gna_hybrid"``), a superset of Llamba's, so a student without kept heads
converts to a plain :class:`~gna.models.llamba.LlambaForCausalLM` (:func:`gna.hybrid.student.to_llamba`)::

    backbone.layers.{i}.mixer.*          DiscreteMamba2, n_v_heads = teacher heads (every layer)
    backbone.layers.{i}.attn.{q,k,v,o}_proj   only the kept heads, each with its own K/V
    backbone.layers.{i}.adapter.*        only with combine="adapter"

Each layer: ``u = norm(h); h += ssm(u) + attn(u); h += mlp(norm(h))`` (``combine="sum"``).
goombalab/mohawk ``components/blocks/DoubleBlock.py`` has both ``DoubleBlockVanilla`` (this sum)
and ``DoubleBlockAdapter`` (``(ssm + Linear(rescale(attn to ssm's per-token mean/std))) / 2``),
which its published hybrid configs use. The sum is the default here: attention heads then write
to the residual stream exactly as they did in the teacher, so a student keeping every head with
its SSM silenced *is* the teacher (the test of the weight copying). ``combine="adapter"``
reproduces the reference block, with its Linear started at the identity (the reference uses
the default random init and leaves it to stage 2: ``build_student(adapter_init="default")``).
Where a layer keeps no head there is no adapter and the SSM output is used as it is (no ``/ 2``),
as in the reference. ``std`` is torch's default, Bessel-corrected, as there.

The attention branch computes its own RoPE (the teacher's ``rope_parameters``) and causal mask,
so each layer stays callable as ``layer(h, attention_mask=None)`` like a Llamba layer.
"""
from __future__ import annotations

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, LlamaConfig
from transformers import initialization as init
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import (LlamaRotaryEmbedding, apply_rotary_pos_emb,
                                                      eager_attention_forward)

from ..cache_names import causal_mask_without_cache
from ..llamba import LlambaConfig, LlambaDecoderLayer, LlambaForCausalLM, LlambaModel
from ..llamba.modeling import LlambaPreTrainedModel, LlambaRMSNorm


@strict
class HybridConfig(LlambaConfig):
    """A Llamba config plus the kept attention heads and the teacher's attention settings."""

    model_type = "gna_hybrid"

    attn_heads: list | None = None
    """Per layer, the teacher head indices kept there; student head j of layer l is teacher
    head ``attn_heads[l][j]``. ``[]``: no attention in that layer."""
    head_dim: int = 64
    attention_bias: bool = False       # q/k/v biases (Qwen2: True)
    attention_out_bias: bool = False   # o_proj bias (Llama with attention_bias: True)
    rope_parameters: dict | None = None
    max_position_embeddings: int = 2048
    teacher_num_heads: int | None = None
    combine: str = "sum"

    def __post_init__(self, **kwargs):
        if self.attn_heads is None:
            self.attn_heads = [[] for _ in range(self.n_layer)]
        self.attn_heads = [[int(h) for h in heads] for heads in self.attn_heads]
        if len(self.attn_heads) != self.n_layer:
            raise ValueError(f"attn_heads has {len(self.attn_heads)} entries for {self.n_layer} layers")
        if self.combine not in ("sum", "adapter"):
            raise ValueError(f"combine={self.combine!r} is not 'sum' or 'adapter'")
        self.rope_parameters = self.rope_parameters or {"rope_type": "default", "rope_theta": 10000.0}
        super().__post_init__(**kwargs)

    @property
    def kept_heads(self) -> list[tuple[int, int]]:
        """The teacher heads kept, ``(layer, head)``, in layer order."""
        return [(l, h) for l, heads in enumerate(self.attn_heads) for h in heads]

    def rotary_config(self) -> LlamaConfig:
        """A Llama config that gives the teacher's RoPE (same head_dim, theta, scaling)."""
        return LlamaConfig(hidden_size=self.d_model, num_attention_heads=self.teacher_num_heads or 1,
                           head_dim=self.head_dim, rope_parameters=dict(self.rope_parameters),
                           max_position_embeddings=self.max_position_embeddings)


class KeptHeadsAttention(nn.Module):
    """Llama attention over ``n_heads`` heads, each with its own K/V (no grouping).

    Dispatches through transformers' ``AttentionInterface`` on ``config._attn_implementation``
    (the model's config), like Llama, so :func:`gna.interventions.masked_mixing.masked_mixers` and
    :func:`gna.patterns.mixing.eager_attention` work on it unchanged.
    """

    def __init__(self, config: HybridConfig, layer_idx: int, n_heads: int):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.num_heads, self.head_dim = n_heads, config.head_dim
        self.num_key_value_groups = 1
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout, self.is_causal = 0.0, True
        width = n_heads * self.head_dim
        self.q_proj = nn.Linear(config.d_model, width, bias=config.attention_bias)
        self.k_proj = nn.Linear(config.d_model, width, bias=config.attention_bias)
        self.v_proj = nn.Linear(config.d_model, width, bias=config.attention_bias)
        self.o_proj = nn.Linear(width, config.d_model, bias=config.attention_out_bias)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, **kwargs):
        """hidden_states (B, T, d_model) -> (output (B, T, d_model), weights (B, H, T, S) or None).

        cache: a :class:`~gna.models.llamba.LlambaCache`; the new tokens' K (after RoPE) and V are
        appended to it and the queries attend over all S = seen + T of them (``attention_mask``
        then is (B, 1, T, S)).
        """
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, *position_embeddings)
        if cache is not None:
            k, v = cache.update_kv(self.layer_idx, k, v)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        out, weights = attend(self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling, **kwargs)
        return self.o_proj(out.reshape(*hidden_states.shape[:-1], -1).contiguous()), weights


class CombineAdapter(nn.Module):
    """mohawk's ``DoubleBlockAdapter`` merge: ``(ssm + W rescale(attn) + b) / 2``, where rescale
    gives the attention output the SSM output's per-token mean and std."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.out_proj = nn.Linear(d_model, d_model, bias=True)
        self.eps = eps

    def forward(self, attn, ssm):
        unit = (attn - attn.mean(-1, keepdim=True)) / (attn.std(-1, keepdim=True) + self.eps)
        scaled = unit * (ssm.std(-1, keepdim=True) + self.eps) + ssm.mean(-1, keepdim=True)
        return (ssm + self.out_proj(scaled)) * 0.5


class HybridDecoderLayer(LlambaDecoderLayer):
    """A Llamba layer plus, where heads are kept, an attention branch on the same normed input."""

    def __init__(self, config: HybridConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        heads = config.attn_heads[layer_idx]
        self.attn = KeptHeadsAttention(config, layer_idx, len(heads)) if heads else None
        # Own RoPE per attention layer (no weights: inv_freq is a non-persistent buffer).
        self.rotary_emb = LlamaRotaryEmbedding(config.rotary_config()) if heads else None
        self.adapter = CombineAdapter(config.d_model) if heads and config.combine == "adapter" else None

    def attention_inputs(self, u: torch.Tensor, attention_mask=None, seen: int = 0):
        """RoPE (cos, sin) and the causal mask for ``u (B, T, d)``, built as the teacher's model does.

        ``seen``: tokens already in a generation cache; ``u`` then holds positions seen..seen+T-1,
        ``attention_mask`` (B, seen + T) covers all of them, and the mask is (B, 1, T, seen + T).
        """
        T = u.shape[1]
        position_ids = torch.arange(seen, seen + T, device=u.device)[None]
        if not seen:  # a whole sequence (or a cache's prefill): exactly the uncached mask
            mask = causal_mask_without_cache(self.attn.config, u, attention_mask, position_ids)
        else:  # additive, as transformers' eager mask: 0 where allowed, the dtype's min elsewhere
            S = seen + T
            allowed = (torch.arange(S, device=u.device)[None, :] <= position_ids[0, :, None])[None]  # (1, T, S)
            if attention_mask is not None:
                allowed = allowed & attention_mask[:, None, :S].bool()
            mask = torch.zeros(allowed.shape, dtype=u.dtype, device=u.device).masked_fill(
                ~allowed, torch.finfo(u.dtype).min)[:, None]
        return self.rotary_emb(u, position_ids), mask

    def mix(self, u, attention_mask=None, mixing_mask=None, cache=None):
        """The token-mixing output for the normed input ``u``: SSM (+ attention). ``cache``: see LlambaCache."""
        extra = {} if cache is None else {"cache": cache}
        y = self.mixer(u, attention_mask=attention_mask, mixing_mask=mixing_mask, **extra)
        if self.attn is None:
            return y
        pe, mask = self.attention_inputs(u, attention_mask, 0 if cache is None else cache.seen)
        a = self.attn(u, pe, mask, **extra)[0]
        return y + a if self.adapter is None else self.adapter(a, y)

    def forward(self, hidden_states, attention_mask=None, mixing_mask=None, cache=None, **kwargs):
        residual = hidden_states
        h = self.mix(self.input_layernorm(hidden_states), attention_mask, mixing_mask, cache)
        hidden_states = residual + h.to(residual.dtype)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class HybridPreTrainedModel(LlambaPreTrainedModel):
    config_class = HybridConfig
    config: HybridConfig
    _no_split_modules = ["HybridDecoderLayer"]
    _supports_sdpa = True
    _supports_attention_backend = True

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        # build_student sets the identity itself: init.copy_ is a no-op on a weight the Linear branch above
        # already initialised (transformers' _is_hf_initialized), so this alone leaves normal(0, 0.02)
        if isinstance(module, CombineAdapter):  # start as "use the attention output as it is"
            init.copy_(module.out_proj.weight, torch.eye(module.out_proj.in_features))
            init.zeros_(module.out_proj.bias)


class HybridModel(HybridPreTrainedModel, LlambaModel):
    """Llamba's backbone (same forward) with :class:`HybridDecoderLayer` layers."""

    def __init__(self, config: HybridConfig):
        HybridPreTrainedModel.__init__(self, config)
        self.embedding = nn.Embedding(config.padded_vocab_size, config.d_model)
        self.layers = nn.ModuleList(HybridDecoderLayer(config, i) for i in range(config.n_layer))
        self.final_layernorm = LlambaRMSNorm(config.d_model, config.norm_epsilon)
        self.post_init()


class HybridForCausalLM(HybridPreTrainedModel, LlambaForCausalLM):
    """Llamba's causal LM (same forward, padded-width float32 logits) over :class:`HybridModel`."""

    def __init__(self, config: HybridConfig):
        HybridPreTrainedModel.__init__(self, config)
        self.backbone = HybridModel(config)
        self.lm_head = nn.Linear(config.d_model, config.padded_vocab_size,
                                 bias=config.lm_head_bias and not config.tie_embeddings)
        self.post_init()
        self.generation_config.use_cache = False


AutoConfig.register("gna_hybrid", HybridConfig, exist_ok=True)
AutoModel.register(HybridConfig, HybridModel, exist_ok=True)
AutoModelForCausalLM.register(HybridConfig, HybridForCausalLM, exist_ok=True)
