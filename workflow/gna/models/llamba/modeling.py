"""Llamba (discrete Mamba-2 + Llama MLP) in pure PyTorch, loading the published checkpoints as they are.

Follows cartesia-ai/edge ``cartesia-pytorch/cartesia_pytorch/Llamba/{llamba.py,
mixers/discrete_mamba2.py}`` (= goombalab/Gather-and-Aggregate ``models/``), with the Triton
``mamba_chunk_scan_combined`` replaced by the chunked scan below. Published parameter names::

    backbone.embedding.weight                          (padded_vocab, d_model)
    backbone.layers.{i}.input_layernorm.weight
    backbone.layers.{i}.mixer.in_proj.weight           (2 d_inner + 2 n_qk_heads d_state + n_v_heads, d_model)
    backbone.layers.{i}.mixer.z_bias                   (d_inner,)     only when ssm_cfg.bias is false
    backbone.layers.{i}.mixer.conv1d.{weight,bias}     (conv_dim, 1, d_conv), (conv_dim,)
    backbone.layers.{i}.mixer.D                        (n_v_heads,)
    backbone.layers.{i}.mixer.out_proj.weight          (d_model, d_inner)
    backbone.layers.{i}.post_attention_layernorm.weight
    backbone.layers.{i}.mlp.{gate,up,down}_proj.weight
    backbone.final_layernorm.weight
    lm_head.weight                                     (padded_vocab, d_model), absent when tied

Logits have ``config.padded_vocab_size`` columns, as in the reference (equal to ``vocab_size``
for the published Llama-3 vocabulary of 128256, a multiple of 8).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput

from ..cache_names import CACHE_NAME, pick_cache
from .configuration import LlambaConfig
from .kernels import fused_conv, fused_ssd, kernels_for


# ---------------------------------------------------------------------------------------------
# The scan

def segsum(log_a: torch.Tensor) -> torch.Tensor:
    """(..., T) -> (..., T, T): ``out[..., l, s] = sum_{k=s+1..l} log_a[k]`` for s <= l, -inf above.

    Built from a masked cumsum (not a difference of cumsums) so it stays exact for long spans.
    """
    T = log_a.shape[-1]
    x = log_a[..., None, :].expand(*log_a.shape, T).transpose(-1, -2)  # x[..., l, s] = log_a[l]
    x = x.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=log_a.device).tril(-1), 0)
    x = x.cumsum(-2)
    return x.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=log_a.device).tril(0), -torch.inf)


def ssd_scan(x, log_a, B, C, chunk_size: int, initial_state=None):
    """Chunked SSD scan (``ssd_minimal_discrete`` of mamba_ssm / phi-mamba), differentiable.

    Computes ``h_t = exp(log_a_t) h_{t-1} + x_t B_t^T``, ``y_t = h_t C_t``, i.e.
    ``y_l = sum_{s<=l} (C_l . B_s) exp(sum_{k=s+1..l} log_a_k) x_s``.

    x: (batch, T, heads, head_dim); log_a: (batch, T, heads); B, C: (batch, T, heads, d_state);
    initial_state: (batch, heads, head_dim, d_state) or None.
    Returns y: (batch, T, heads, head_dim), final_state: (batch, heads, head_dim, d_state).
    """
    b, T, h, p = x.shape
    pad = (-T) % chunk_size
    if pad:  # zero x/B and zero log-decay: padded steps leave the state untouched
        x, B, C = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (x, B, C))
        log_a = F.pad(log_a, (0, 0, 0, pad))
    c, L = (T + pad) // chunk_size, chunk_size
    x, B, C = (t.reshape(b, c, L, h, -1) for t in (x, B, C))
    log_a = log_a.reshape(b, c, L, h).permute(0, 3, 1, 2)  # (b, h, c, L)
    a_cum = log_a.cumsum(-1)

    # Within each chunk: the quadratic (attention-like) form.
    scores = torch.einsum("bclhn,bcshn->bhcls", C, B) * torch.exp(segsum(log_a))
    y_diag = torch.einsum("bhcls,bcshp->bclhp", scores, x)

    # State at the end of each chunk from that chunk alone, then carried across chunks.
    decay_to_end = torch.exp(a_cum[..., -1:] - a_cum)  # (b, h, c, L)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_to_end, x)
    if initial_state is None:
        initial_state = torch.zeros_like(states[:, 0])
    states = torch.cat([initial_state[:, None], states], dim=1)  # (b, c+1, h, p, n)
    decay_chunk = torch.exp(segsum(F.pad(a_cum[..., -1], (1, 0))))  # (b, h, c+1, c+1)
    states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = states[:, :-1], states[:, -1]

    # Contribution of the state entering each chunk.
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, states, torch.exp(a_cum))
    y = (y_diag + y_off).reshape(b, c * L, h, p)[:, :T]
    return y, final_state


# ---------------------------------------------------------------------------------------------
# Modules

class LlambaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)  # Llama's order: cast back, then scale


class LlambaMLP(nn.Module):
    def __init__(self, d_model: int, intermediate_size: int, bias: bool = False, act_fn: str = "silu", **_):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(d_model, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, d_model, bias=bias)
        self.act_fn = ACT2FN[act_fn]

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DiscreteMamba2(nn.Module):
    """The discrete Mamba-2 token mixer of MOHAWK / Llamba.

    ``in_proj(u)`` splits into ``[xBC (d_inner + 2 n_qk_heads d_state), z (d_inner), A_log (n_v_heads)]``;
    ``xBC`` goes through a causal depthwise conv (+ ``activation``) and splits into x, B, C
    (B, C have ``n_qk_heads`` groups, value head ``h`` uses group ``h // (n_heads // n_qk_heads)``).
    The reference calls the Mamba-2 kernel with ``x / dt``, ``dt = softplus(A_log)``, ``A = -1``,
    so ``dt x`` is just ``x`` and the per-step decay is ``exp(-softplus(A_log))``; then
    ``y = scan + D x`` and ``out = out_proj(y * silu(z + z_bias))``.
    The input of ``out_proj`` is ``(..., n_heads * head_dim)``, heads-major.
    """

    def __init__(self, d_model: int, d_state: int = 64, n_qk_heads: int = 32, n_v_heads: int = 32,
                 d_conv: int = 4, expand: int = 1, activation: str = "identity", bias: bool = False,
                 conv_bias: bool = True, chunk_size: int = 128, layer_idx: int | None = None, **_):
        super().__init__()
        self.d_model, self.d_state, self.d_conv, self.chunk_size = d_model, d_state, d_conv, chunk_size
        self.d_inner = expand * d_model
        self.n_heads, self.n_qk_heads = n_v_heads, n_qk_heads
        self.head_dim = self.d_inner // n_v_heads
        if self.head_dim * n_v_heads != self.d_inner or n_v_heads % n_qk_heads:
            raise ValueError(f"d_inner={self.d_inner} must split into n_v_heads={n_v_heads} heads, "
                             f"and n_v_heads into n_qk_heads={n_qk_heads} groups")
        if activation not in ("identity", "silu", "swish"):
            raise ValueError(f"unknown activation {activation!r}")
        self.activation, self.layer_idx = activation, layer_idx
        conv_dim = self.d_inner + 2 * n_qk_heads * d_state
        self.in_proj = nn.Linear(d_model, conv_dim + self.d_inner + n_v_heads, bias=bias)
        # The reference has z_bias only without projection biases (state-dict key absent otherwise).
        self.z_bias = None if bias else nn.Parameter(torch.zeros(self.d_inner))
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, d_conv, groups=conv_dim, padding=d_conv - 1, bias=conv_bias)
        self.D = nn.Parameter(torch.ones(n_v_heads))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias)
        self.mixing_mask = None  # optional standing (batch, n_heads, T, T) mask for when forward gets none

    def _project(self, u, attention_mask=None):
        """u (b, T, d_model) -> conv input xBC (b, T, conv_dim) with padded steps zeroed, z (b, T, d_inner),
        A_log (b, T, n_heads) and keep (b, T, 1) or None (the first T columns of ``attention_mask``)."""
        T = u.shape[1]
        xBC, z, A_log = torch.split(self.in_proj(u), [self.conv1d.in_channels, self.d_inner, self.n_heads], -1)
        keep = None if attention_mask is None else attention_mask[:, :T, None].to(xBC.dtype)
        if keep is not None:  # padded steps then look like the conv's own zero padding
            xBC = xBC * keep
        return xBC, z, A_log, keep

    def _conv(self, xBC, keep, kernels=None):
        """Causal depthwise conv (+ activation) of the conv input xBC (b, T, conv_dim) -> (b, T, conv_dim)."""
        fused = None
        if kernels is not None and kernels.conv is not None:  # None where the kernel's preconditions fail
            fused = fused_conv(kernels.conv, xBC, self.conv1d.weight, self.conv1d.bias, self.activation)
        if fused is not None:
            xBC = fused
        else:
            xBC = self.conv1d(xBC.transpose(1, 2))[..., :xBC.shape[1]].transpose(1, 2)
            if self.activation != "identity":
                xBC = F.silu(xBC)
        if keep is not None:  # and add nothing to the state (exact for left padding too)
            xBC = xBC * keep
        return xBC

    def _split(self, xBC):
        """Conv output (b, T, conv_dim) -> x (b, T, n_heads, head_dim), B, C (b, T, n_qk_heads, d_state); no cast."""
        b, T, _ = xBC.shape
        bc = self.n_qk_heads * self.d_state
        x, B, C = torch.split(xBC, [self.d_inner, bc, bc], -1)
        return (x.reshape(b, T, self.n_heads, self.head_dim), B.reshape(b, T, self.n_qk_heads, self.d_state),
                C.reshape(b, T, self.n_qk_heads, self.d_state))

    def _heads(self, xBC, A_log, dtype):
        """Conv output (b, T, conv_dim) -> x (b,T,h,p), log_a (b,T,h), B, C (b,T,h,n) repeated per head, in float32+."""
        x, B, C = self._split(xBC)
        dtype = torch.promote_types(dtype, torch.float32)  # the Triton kernel also scans in fp32
        rep = self.n_heads // self.n_qk_heads
        x = x.to(dtype)
        B = B.repeat_interleave(rep, 2).to(dtype)
        C = C.repeat_interleave(rep, 2).to(dtype)
        log_a = -F.softplus(A_log.to(dtype))
        return x, log_a, B, C

    def ssm_inputs(self, u, attention_mask=None):
        """u: (batch, T, d_model) -> x (b,T,h,p), log_a (b,T,h), B, C (b,T,h,n) in float32+, z (b,T,d_inner).

        x is the value stream that :meth:`mixing_matrix` multiplies; B, C are already repeated
        from n_qk_heads groups to n_heads; log_a = -softplus(A_log) is the per-step log decay.
        """
        xBC, z, A_log, keep = self._project(u, attention_mask)
        x, log_a, B, C = self._heads(self._conv(xBC, keep), A_log, u.dtype)
        return x, log_a, B, C, z

    @staticmethod
    def _materialise(log_a, B, C, D):
        """(b, h, T, T): ``(C_l . B_s) exp(sum_{k=s+1..l} log_a_k)`` below the diagonal, + D on it."""
        T = log_a.shape[1]
        M = torch.einsum("blhn,bshn->bhls", C, B) * torch.exp(segsum(log_a.transpose(1, 2)))
        return M + torch.diag_embed(D.to(M.dtype)[:, None].expand(-1, T))

    def mixing_matrix(self, hidden_states, attention_mask=None) -> torch.Tensor:
        """Each head's token-mixing matrix M: (batch, n_heads, T, T), lower triangular.

        ``hidden_states`` is the mixer input (after ``input_layernorm``), (batch, T, d_model).
        Meaning: with x the conv output split per head, (batch, T, n_heads, head_dim), i.e. the
        value stream *before* the reference's division by softplus(A_log),
        ``y[b, l, h] = sum_s M[b, h, l, s] x[b, s, h]`` is the SSM output including the D skip
        (diagonal), *before* the gate: the mixer returns ``out_proj((y * silu(z + z_bias)).flatten(-2))``.
        M[l, s] = (C_l . B_s) exp(-sum_{k=s+1..l} softplus(A_log_k)) for s < l; M[l, l] = C_l . B_l + D.
        Computed in float32 (float64 for float64 inputs).
        """
        _, log_a, B, C, _ = self.ssm_inputs(hidden_states, attention_mask)
        return self._materialise(log_a, B, C, self.D)

    def _gate_out(self, y, z):
        """y (b, T, n_heads, head_dim): SSM output with the D skip -> out_proj(y * silu(z + z_bias)) (b, T, d_model)."""
        y = y.flatten(-2).to(z.dtype)
        gate = F.silu(z if self.z_bias is None else z + self.z_bias)
        return self.out_proj(y * gate)

    def forward(self, hidden_states, attention_mask=None, mixing_mask=None, mixing_matrix=None, cache=None,
                **kwargs):
        """hidden_states: (batch, T, d_model) -> (batch, T, d_model).

        attention_mask: (batch, T), 1 = real token; padded steps' conv inputs and x, B, C are
        zeroed (as HF Mamba zeroes padded states), so right *and* left padding leave the real
        tokens' outputs as they are alone.
        mixing_mask: (batch, n_heads, T, T), multiplied onto :meth:`mixing_matrix` before it is
        applied (quadratic path); mixing_matrix: the same shape, used instead of the materialised one.
        Without either, the chunked scan runs (same result as an all-ones mask); on CUDA, with
        mamba-ssm / causal-conv1d importable, their fused kernels do the scan and the conv.
        cache: a :class:`LlambaCache` (generation). With ``cache.seen == 0`` the whole input runs as
        above and the conv window and final SSM state are stored; afterwards the input holds only
        the new tokens (attention_mask: all ``seen + T`` columns) and each costs one recurrence step.
        """
        mixing_mask = self.mixing_mask if mixing_mask is None else mixing_mask
        quadratic = mixing_mask is not None or mixing_matrix is not None
        if cache is not None:
            if quadratic:
                raise ValueError("a mixing mask / matrix is defined over a whole (T, T) sequence: it cannot be "
                                 "applied with a generation cache (generate with use_cache=False)")
            if self.layer_idx is None:
                raise ValueError("a DiscreteMamba2 used with a generation cache needs its layer_idx")
            if cache.seen:
                return self._step(hidden_states, attention_mask, cache)
        kernels = None if quadratic else kernels_for(hidden_states)
        xBC, z, A_log, keep = self._project(hidden_states, attention_mask)
        if cache is not None:
            cache.conv[self.layer_idx] = self._conv_window(xBC)
        xBC = self._conv(xBC, keep, kernels)
        final = None
        if kernels is not None and kernels.scan is not None:
            x, B, C = self._split(xBC)
            y, final = fused_ssd(kernels.scan, x, A_log, B, C, self.chunk_size, return_final_state=cache is not None)
            x = x.to(torch.promote_types(x.dtype, torch.float32))
            y = y.to(x.dtype) + self.D.to(x.dtype)[:, None] * x
        else:
            x, log_a, B, C = self._heads(xBC, A_log, hidden_states.dtype)
            if not quadratic:
                y, final = ssd_scan(x, log_a, B, C, self.chunk_size)
                y = y + self.D.to(x.dtype)[:, None] * x
            else:
                M = self._materialise(log_a, B, C, self.D) if mixing_matrix is None else mixing_matrix.to(x.dtype)
                if mixing_mask is not None:
                    M = M * mixing_mask.to(M.dtype)
                y = torch.einsum("bhls,bshp->blhp", M, x)
        if cache is not None:
            cache.ssm[self.layer_idx] = final
        return self._gate_out(y, z)

    def _conv_window(self, xBC):
        """The last d_conv conv inputs of xBC (b, T, conv_dim), zeros before the start: (b, conv_dim, d_conv)."""
        window = xBC.transpose(1, 2)[..., -self.d_conv:]
        return F.pad(window, (self.d_conv - window.shape[-1], 0)).contiguous()  # a copy: frees xBC

    def _step(self, u, attention_mask, cache):
        """Cached decoding of u (b, T_new, d_model), usually T_new = 1: one recurrence step per token.

        The same arithmetic as the scan, one token at a time: the conv over the stored window, then
        ``s = exp(log_a) s + x B^T``, ``y = s C + D x``. Cost per token is independent of the prefix.
        """
        i, seen, T = self.layer_idx, cache.seen, u.shape[1]
        am = None if attention_mask is None else attention_mask[:, seen:seen + T]
        xBC_in, z, A_log, keep = self._project(u, am)
        window, state = cache.conv[i], cache.ssm[i]                 # (b, conv_dim, d_conv), (b, h, p, n)
        weight = self.conv1d.weight[:, 0]                             # (conv_dim, d_conv)
        ys = []
        for t in range(T):
            window = torch.cat([window[..., 1:], xBC_in[:, t, :, None]], -1)
            xBC = (window * weight).sum(-1)
            if self.conv1d.bias is not None:
                xBC = xBC + self.conv1d.bias
            if self.activation != "identity":
                xBC = F.silu(xBC)
            if keep is not None:
                xBC = xBC * keep[:, t]
            x, log_a, B, C = (v[:, 0] for v in self._heads(xBC[:, None], A_log[:, t:t + 1], u.dtype))
            state = torch.exp(log_a)[..., None, None] * state + x[..., None] * B[:, :, None, :]
            ys.append(torch.einsum("bhpn,bhn->bhp", state, C) + self.D.to(x.dtype)[:, None] * x)
        cache.conv[i], cache.ssm[i] = window, state
        return self._gate_out(torch.stack(ys, 1), z)


class LlambaCache:
    """What cached generation carries from one forward to the next (``generate``'s ``cache``, before
    transformers 5.24 ``cache_params``: :data:`gna.models.cache_names.CACHE_NAME`).

    Per layer index: ``conv[i]`` (batch, conv_dim, d_conv), the mixer's last conv inputs;
    ``ssm[i]`` (batch, n_heads, head_dim, d_state), float32, its SSM state; and for the hybrid
    student's kept attention heads ``keys[i]``, ``values[i]`` (batch, kept_heads, seen, head_dim),
    K after RoPE and V. ``seen``: tokens consumed so far (the next token's position). The SSM part
    is the same size whatever the prefix, so a decoding step costs O(1) in the prefix length there.
    """

    is_compileable = False  # read by generate's auto-compile check (on CUDA)
    is_croppable = False    # no rollback (assisted / deferred-stop decoding would need it)

    def __init__(self):
        self.conv: dict[int, torch.Tensor] = {}
        self.ssm: dict[int, torch.Tensor] = {}
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.seen = 0

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen

    def update_kv(self, layer_idx: int, k: torch.Tensor, v: torch.Tensor):
        """Append the new tokens' k, v (b, heads, T_new, head_dim); return all of them so far."""
        if layer_idx in self.keys:
            k = torch.cat([self.keys[layer_idx], k], 2)
            v = torch.cat([self.values[layer_idx], v], 2)
        self.keys[layer_idx], self.values[layer_idx] = k, v
        return k, v

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Beam search: keep batch rows ``beam_idx``."""
        for store in (self.conv, self.ssm, self.keys, self.values):
            for i, t in store.items():
                store[i] = t.index_select(0, beam_idx.to(t.device))


class LlambaDecoderLayer(nn.Module):
    """Pre-norm block: ``h += mixer(norm(h)); h += mlp(norm(h))``. Returns the hidden-states tensor."""

    def __init__(self, config: LlambaConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        # The reference hard-codes eps=1e-5 here and uses norm_epsilon only for the final norm;
        # every published config has norm_epsilon=1e-5, so this is the same there.
        self.input_layernorm = LlambaRMSNorm(config.d_model, config.norm_epsilon)
        self.mixer = DiscreteMamba2(config.d_model, layer_idx=layer_idx, **config.ssm_cfg)
        self.post_attention_layernorm = LlambaRMSNorm(config.d_model, config.norm_epsilon)
        self.mlp = LlambaMLP(config.d_model, **config.mlp_cfg)

    def forward(self, hidden_states, attention_mask=None, mixing_mask=None, cache=None, **kwargs):
        residual = hidden_states
        extra = {} if cache is None else {"cache": cache}  # hooks that read the mixer's kwargs see no new key
        h = self.mixer(self.input_layernorm(hidden_states), attention_mask=attention_mask, mixing_mask=mixing_mask,
                       **extra)
        hidden_states = residual + h.to(residual.dtype)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))

    def input_mixing_matrix(self, hidden_states, attention_mask=None) -> torch.Tensor:
        """The mixer's matrix (batch, n_heads, T, T) on this layer's normed input ``hidden_states``
        (batch, T, d_model): the student side of distillation stage 1, as one call on the layer, so
        that a sharded layer (gna.hybrid.sharding) gathers its weights for it as for a forward."""
        return self.mixer.mixing_matrix(self.input_layernorm(hidden_states), attention_mask)


class LlambaPreTrainedModel(PreTrainedModel):
    config_class = LlambaConfig
    config: LlambaConfig
    base_model_prefix = "backbone"
    _no_split_modules = ["LlambaDecoderLayer"]
    supports_gradient_checkpointing = False

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # no DynamicCache: generation carries its own LlambaCache

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)  # Linear/Conv1d/Embedding normal(0, 0.02), biases 0, norms 1
        if isinstance(module, DiscreteMamba2):
            init.ones_(module.D)
            if module.z_bias is not None:
                init.zeros_(module.z_bias)


class LlambaModel(LlambaPreTrainedModel):
    """The backbone: embedding, decoder layers, final RMSNorm."""

    def __init__(self, config: LlambaConfig):
        super().__init__(config)
        self.embedding = nn.Embedding(config.padded_vocab_size, config.d_model)
        self.layers = nn.ModuleList(LlambaDecoderLayer(config, i) for i in range(config.n_layer))
        self.final_layernorm = LlambaRMSNorm(config.d_model, config.norm_epsilon)
        self.post_init()

    def get_input_embeddings(self):
        return self.embedding

    def set_input_embeddings(self, value):
        self.embedding = value

    def supports_cache(self) -> bool:
        """Whether cached generation gives what the full forward gives: every layer is this model's own
        (a swapped-in module, e.g. a teacher layer shim, would ignore the cache) and no mixer holds a
        standing mixing mask (defined over the whole sequence)."""
        return all(isinstance(layer, LlambaDecoderLayer) and isinstance(layer.mixer, DiscreteMamba2)
                   and layer.mixer.mixing_mask is None for layer in self.layers)

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, output_hidden_states=None,
                cache: LlambaCache | None = None, cache_params: LlambaCache | None = None,
                **kwargs) -> BaseModelOutput:
        """``hidden_states`` (if asked): the embeddings, each later layer's input, and the normed output.

        ``cache`` (or ``cache_params``, its name before transformers 5.24): a :class:`LlambaCache`,
        updated in place; once it has seen tokens the input holds only the new ones (``attention_mask``
        all of them, seen + new).
        """
        cache_params = pick_cache(cache, cache_params)
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if cache_params is not None and not self.supports_cache():
            raise ValueError("this model's layers were replaced or carry a mixing mask: a generation cache would be "
                             "ignored by them; run without one (use_cache=False)")
        h = self.embedding(input_ids) if inputs_embeds is None else inputs_embeds
        output_hidden_states = output_hidden_states if output_hidden_states is not None \
            else self.config.output_hidden_states
        all_hidden = []
        for layer in self.layers:
            if output_hidden_states:
                all_hidden.append(h)
            # positional h: hooks read layer inputs as args[0]
            h = (layer(h, attention_mask=attention_mask) if cache_params is None
                 else layer(h, attention_mask=attention_mask, cache=cache_params))
        if cache_params is not None:
            cache_params.seen += h.shape[1]
        h = self.final_layernorm(h)
        if output_hidden_states:
            all_hidden.append(h)
        return BaseModelOutput(last_hidden_state=h, hidden_states=tuple(all_hidden) if output_hidden_states else None)


if CACHE_NAME == "cache":
    @dataclass
    class LlambaCausalLMOutput(CausalLMOutput):
        """CausalLMOutput plus the generation cache (absent from the output when None)."""

        cache: LlambaCache | None = None
else:  # transformers < 5.24: generate reads and passes on ``cache_params``
    @dataclass
    class LlambaCausalLMOutput(CausalLMOutput):
        """CausalLMOutput plus the generation cache (absent from the output when None)."""

        cache_params: LlambaCache | None = None


class LlambaForCausalLM(LlambaPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "backbone.embedding.weight"}
    logits_to_keep_positions = True  # forward takes a 1-D tensor of positions (gna.probes.scoring)

    def __init__(self, config: LlambaConfig):
        super().__init__(config)
        self.backbone = LlambaModel(config)
        self.lm_head = nn.Linear(config.d_model, config.padded_vocab_size,
                                 bias=config.lm_head_bias and not config.tie_embeddings)
        self.post_init()
        self.generation_config.use_cache = False

    def get_input_embeddings(self):
        return self.backbone.embedding

    def set_input_embeddings(self, value):
        self.backbone.embedding = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def final_hidden_states(self, input_ids, attention_mask=None) -> torch.Tensor:
        """The backbone's last hidden states (batch, T, d_model), before the LM head: distillation
        stage 3 applies the head itself a chunk of positions at a time (gna.hybrid.stage_losses)."""
        return self.backbone(input_ids, attention_mask=attention_mask).last_hidden_state

    def forward(self, input_ids=None, attention_mask=None, labels=None, inputs_embeds=None,
                output_hidden_states=None, logits_to_keep: int | torch.Tensor = 0, use_cache: bool | None = None,
                cache: LlambaCache | None = None, cache_params: LlambaCache | None = None,
                **kwargs) -> LlambaCausalLMOutput:
        """logits: (batch, T, padded_vocab_size), float32. ``labels`` are shifted inside; -100 is ignored.
        ``logits_to_keep``: an int k keeps the last k positions' logits, a 1-D tensor those positions.

        ``use_cache=True`` starts a :class:`LlambaCache` when none is given, returned as the output's
        ``cache`` (``cache_params`` before transformers 5.24; either name is taken as input); pass it
        back with only the new tokens (and the whole attention mask) to continue.
        """
        cache_params = pick_cache(cache, cache_params)
        if cache_params is None and use_cache:
            cache_params = LlambaCache()
        out = self.backbone(input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                            output_hidden_states=output_hidden_states, cache_params=cache_params)
        h = out.last_hidden_state
        if isinstance(logits_to_keep, torch.Tensor):  # positions (1-D), as transformers' causal LMs take
            h = h[:, logits_to_keep]
        elif logits_to_keep:
            h = h[:, -logits_to_keep:]
        logits = self.lm_head(h.to(self.lm_head.weight.dtype)).float()
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten().to(logits.device),
                                   ignore_index=-100)
        return LlambaCausalLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                    **{CACHE_NAME: cache_params})

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, cache=None, cache_params=None,
                                      use_cache=None, **kwargs):
        # With use_cache (lm-eval's generate_until passes it), the first step runs the prompt and
        # fills a LlambaCache, later steps feed only the tokens not yet seen. Without it, or when
        # layers were swapped out / masked (see LlambaModel.supports_cache), every step runs the
        # full sequence so far, as before.
        cache_params = pick_cache(cache, cache_params)
        inputs = {}
        if use_cache and self.backbone.supports_cache():
            if cache_params is not None and cache_params.seen:
                input_ids = input_ids[:, cache_params.seen:]
            inputs.update(use_cache=True, **{CACHE_NAME: cache_params})
        inputs.update(input_ids=input_ids, attention_mask=attention_mask)
        if kwargs.get("logits_to_keep") is not None:
            inputs["logits_to_keep"] = kwargs["logits_to_keep"]
        return inputs
