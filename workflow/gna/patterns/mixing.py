"""Token-mixing matrices: what each head moves from position s to position t.

- attention heads: the softmax weights ``A[b, h, t, s]`` (eager attention);
- Mamba-2 heads (transformers' Mamba2 and Zamba2 mixers): the materialised SSD matrix
  ``T[b, h, t, s] = (C_t . B_s) exp(cum_t - cum_s) dt_s`` for ``s <= t``, plus ``D_h`` on the
  diagonal, with ``cum = cumsum(dt * A)``; then ``y_t = sum_s T[t, s] x_s`` is the SSM output
  before the gated norm, ``x`` being the post-convolution input split;
- discrete Mamba-2 (Llamba) heads: the mixer's own ``mixing_matrix``.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InterventionError
from ..models.description import Mixer


def _is_hf_mamba2(module: nn.Module) -> bool:
    return all(hasattr(module, a) for a in ("in_proj", "conv1d", "dt_bias", "A_log", "norm", "num_heads"))


def mamba2_terms(mixer: nn.Module, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None):
    """Recompute a transformers Mamba-2 mixer's SSD terms from its input ``hidden (B, T, d_model)``.

    Returns ``x (B, T, H, P)``, ``matrix (B, H, T, T)`` (float32, D on the diagonal) and
    ``gate (B, T, H*P)`` such that ``out_proj(norm(einsum(matrix, x), gate))`` is the mixer output.
    """
    if attention_mask is not None:
        hidden = hidden * attention_mask[:, :, None].to(hidden.dtype)
    Bsz, T, _ = hidden.shape
    H, P, N, G = mixer.num_heads, mixer.head_dim, mixer.ssm_state_size, mixer.n_groups
    # Falcon-H1's mixer scales its input and its projection (muP); 1 / absent elsewhere.
    proj = mixer.in_proj(hidden * getattr(mixer, "ssm_in_multiplier", 1.0))
    if getattr(mixer, "mup_vector", None) is not None:
        proj = proj * mixer.mup_vector
    gate, xBC, dt = proj.split([mixer.intermediate_size, mixer.conv_dim, H], dim=-1)
    xBC = mixer.act(mixer.conv1d(xBC.transpose(1, 2))[..., :T]).transpose(1, 2)
    if attention_mask is not None:
        xBC = xBC * attention_mask[:, :, None].to(xBC.dtype)
    x, B, C = xBC.split([mixer.intermediate_size, G * N, G * N], dim=-1)
    dt = F.softplus(dt + mixer.dt_bias).clamp(*mixer.time_step_limit).float()  # (B, T, H)
    A = -torch.exp(mixer.A_log.float())                                           # (H,)
    B = B.float().view(Bsz, T, G, N).repeat_interleave(H // G, dim=2)              # (B, T, H, N)
    C = C.float().view(Bsz, T, G, N).repeat_interleave(H // G, dim=2)
    cum = torch.cumsum(dt * A, dim=1).transpose(1, 2)                              # (B, H, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=hidden.device).tril()
    decay = torch.exp((cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, float("-inf")))
    cb = torch.einsum("bthn,bshn->bhts", C, B)
    matrix = cb * decay * dt.transpose(1, 2)[:, :, None, :]
    matrix = matrix + torch.diag_embed(mixer.D.float()[None, :, None].expand(Bsz, H, T))
    return x.view(Bsz, T, H, P), matrix, gate


def mamba2_apply(mixer: nn.Module, x: torch.Tensor, matrix: torch.Tensor, gate: torch.Tensor,
                 stats_matrix: torch.Tensor | None = None) -> torch.Tensor:
    """The mixer output from (possibly masked) SSD terms: ``out_proj(norm(matrix @ x, gate))``.

    ``stats_matrix``: the gated RMSNorm takes its statistics from ``stats_matrix @ x`` instead (the
    unmasked matrix). HF Mamba-2 normalises over a group of heads (all of them when ``n_groups=1``),
    so with the masked output's own statistics masking one head would rescale every other head of
    its group; with the unmasked statistics the masked head's effect stays local to its own slice.
    """
    y = torch.einsum("bhts,bshp->bthp", matrix, x.float()).flatten(2)
    if isinstance(mixer.norm, nn.Identity):  # Falcon-H1 without mamba_rms_norm: gate only, no statistics
        return mixer.out_proj((y * F.silu(gate.float())).to(gate.dtype))
    if stats_matrix is None:
        return mixer.out_proj(mixer.norm(y.to(gate.dtype), gate))
    if not hasattr(mixer.norm, "variance_epsilon"):
        raise InterventionError(f"{type(mixer.norm).__name__} is not Mamba-2's gated RMSNorm: masking with the "
                                "unmasked statistics is implemented for that norm only")
    ref = torch.einsum("bhts,bshp->bthp", stats_matrix, x.float()).flatten(2)
    return mixer.out_proj(_gated_norm(mixer.norm, y.to(gate.dtype), gate, ref.to(gate.dtype)))


def _gated_norm(norm: nn.Module, y: torch.Tensor, gate: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """transformers' ``MambaRMSNormGated`` (Mamba-2, Zamba2) applied to ``y (B, T, H*P)`` with the
    per-group variance of ``ref`` (same shape): the same operations in the same order, so
    ``ref is y`` gives the module's own output. transformers before 5.23 has no ``group_size``: its
    norm takes the variance over the whole width (one group), as this does then."""
    dtype = y.dtype
    g = F.silu(gate.to(torch.float32))
    h, r = y.to(torch.float32) * g, ref.to(torch.float32) * g
    *prefix, last = h.shape
    size = getattr(norm, "group_size", last)
    groups = last // size
    variance = r.view(*prefix, groups, size).pow(2).mean(-1, keepdim=True)
    h = (h.view(*prefix, groups, size) * torch.rsqrt(variance + norm.variance_epsilon)).view(*prefix, last)
    return norm.weight * h.to(dtype)


@contextmanager
def _capture(module: nn.Module, store: list, output: bool) -> Iterator[None]:
    if output:
        h = module.register_forward_hook(lambda m, a, o: store.append(o))
    else:
        h = module.register_forward_pre_hook(lambda m, a, k: store.append((a, k)), with_kwargs=True)
    try:
        yield
    finally:
        h.remove()


@contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """Switch to eager attention (the only implementation that returns weights), then back."""
    previous = model.config._attn_implementation
    if previous != "eager":
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if previous != "eager":
            model.set_attn_implementation(previous)


def has_mixing_matrix(mixer: Mixer) -> bool:
    """Whether :func:`mixing_matrices` can read ``mixer``'s heads (attention, Hugging Face Mamba-2,
    discrete Mamba-2); Mamba-1's selective scan has no (T, T) matrix read here."""
    return mixer.kind in ("attention", "discrete-mamba2") or (mixer.kind == "mamba2" and _is_hf_mamba2(mixer.module))


@torch.no_grad()
def mixing_matrices(model: nn.Module, mixer: Mixer, input_ids: torch.Tensor,
                    attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``(batch, n_heads, T, T)``: every head's token-mixing matrix of ``mixer`` on these inputs."""
    store: list = []
    if mixer.kind == "attention":
        with eager_attention(model), _capture(mixer.module, store, output=True):
            model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        weights = store[0][1]
        if weights is None:
            raise InterventionError(f"layer {mixer.layer}'s attention returned no weights")
        return weights.float()
    with _capture(mixer.module, store, output=False):
        model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    (args, kwargs), = store[:1]
    hidden = args[0] if args else kwargs["hidden_states"]
    if mixer.kind == "mamba2" and _is_hf_mamba2(mixer.module):
        return mamba2_terms(mixer.module, hidden, attention_mask)[1]
    if mixer.kind == "discrete-mamba2":
        return mixer.module.mixing_matrix(hidden).float()
    raise InterventionError(f"no token-mixing matrix for {mixer.kind} mixers (layer {mixer.layer}); "
                            "supported: attention, mamba2, discrete-mamba2")
