"""A faster exact selective scan for training ``MambaForCausalLM`` on the CPU.

transformers' pure-PyTorch Mamba-1 path (``modeling_mamba.mamba_selective_scan``) runs the
recurrence ``h_t = exp(dt_t A) * h_{t-1} + dt_t B_t x_t``, ``y_t = C_t . h_t`` as a Python loop
under autograd (hundreds of small graph nodes per layer), or through ``mambapy``'s parallel
scan; both are slow in backward. :func:`selective_scan` computes the same function with a
``torch.autograd.Function`` whose forward is the same loop without autograd and whose backward
is the reverse-time loop written out by hand (``g_h_t = C_t gy_t + exp(dt_{t+1} A) g_h_{t+1}``),
so each time step costs two fused tensor operations in each direction.

Only the scan is swapped, and only inside :func:`fast_mamba_scan` (a context manager the
trainer enters for the ``mamba1`` family): the model stays transformers' ``MambaForCausalLM``,
its parameters and saved checkpoint are plain Mamba ones, and outside the context (lm-eval, the
interventions) transformers' own path runs. ``tests/test_micro_world.py`` checks that logits
and parameter gradients equal transformers' own forward within float32 rounding.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F


class _Scan(torch.autograd.Function):
    """``y[l, b, d] = sum_n h[l, b, d, n] C[l, b, n]`` with
    ``h_l = exp(dt_l A) * h_{l-1} + dtx_l B_l`` (``h_{-1} = 0``), time-major inputs:
    ``dt``, ``dtx`` (= dt * x): (L, b, d); ``A``: (d, n); ``B``, ``C``: (L, b, n).

    The loops touch one (b, d, n) slice per step (it stays in cache); everything that does not
    need the recurrence is done afterwards on whole tensors.
    """

    @staticmethod
    def forward(ctx, dt, A, B, C, dtx):
        L, b, d = dt.shape
        n = A.shape[-1]
        hs = dt.new_empty(L, b, d, n)
        h = dt.new_zeros(b, d, n)
        for t in range(L):
            dBu = dtx[t].unsqueeze(-1) * B[t].unsqueeze(1)
            h = torch.addcmul(dBu, torch.exp(dt[t].unsqueeze(-1) * A), h)
            hs[t] = h
        y = torch.einsum("lbdn,lbn->lbd", hs, C)
        ctx.save_for_backward(dt, A, B, C, dtx, hs)
        return y

    @staticmethod
    def backward(ctx, gy):
        dt, A, B, C, dtx, hs = ctx.saved_tensors
        L = dt.shape[0]
        gy = gy.contiguous()
        gh = torch.empty_like(hs)                        # dLoss/dh_t, through all later steps
        g = gy[L - 1].unsqueeze(-1) * C[L - 1].unsqueeze(1)
        gh[L - 1] = g
        for t in range(L - 2, -1, -1):
            dA_next = torch.exp(dt[t + 1].unsqueeze(-1) * A)
            g = torch.addcmul(gy[t].unsqueeze(-1) * C[t].unsqueeze(1), dA_next, g)
            gh[t] = g
        gC = torch.einsum("lbd,lbdn->lbn", gy, hs)
        gdtx = torch.einsum("lbdn,lbn->lbd", gh, B)
        gB = torch.einsum("lbdn,lbd->lbn", gh, dtx)
        # through dA_t = exp(dt_t A): q_t = gh_t * h_{t-1} * dA_t (zero at t = 0)
        q = gh[1:] * hs[:-1] * torch.exp(dt[1:].unsqueeze(-1) * A)
        gdt = torch.zeros_like(dt)
        gdt[1:] = torch.einsum("lbdn,dn->lbd", q, A)
        gA = torch.einsum("lbdn,lbd->dn", q, dt[1:])
        return gdt, gA, gB, gC, gdtx


def selective_scan(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False, **_):
    """Drop-in for ``transformers.models.mamba.modeling_mamba.mamba_selective_scan`` (same
    arguments and result; ``hidden_states``/``dt``: (b, d, L), ``B``/``C``: (b, n, L))."""
    if return_last_state:
        raise NotImplementedError("gna.micro.mamba_scan is for training (no cache); use transformers' path")
    input_dtype = hidden_states.dtype
    if delta_bias is not None:
        dt = dt + delta_bias.to(dt.dtype)[..., None]
    if delta_softplus:
        dt = F.softplus(dt)
    dt_t = dt.float().permute(2, 0, 1).contiguous()                        # (L, b, d)
    dtx = (dt_t * hidden_states.float().permute(2, 0, 1)).contiguous()
    B_t = B.float().permute(2, 0, 1).contiguous()                          # (L, b, n)
    C_t = C.float().permute(2, 0, 1).contiguous()
    y = _Scan.apply(dt_t, A.float(), B_t, C_t, dtx)                        # (L, b, d)
    out = y.permute(1, 2, 0).to(input_dtype)
    if D is not None:
        out = out + hidden_states * D[None, :, None]
    if z is not None:
        out = out * F.silu(z)
    return out


@contextmanager
def fast_mamba_scan(enabled: bool = True):
    """Within the context, ``MambaForCausalLM`` runs :func:`selective_scan` (full-sequence
    forward without a cache); transformers' own function is restored on exit."""
    if not enabled:
        yield
        return
    from transformers.models.mamba import modeling_mamba as mm
    original = mm.mamba_selective_scan
    mm.mamba_selective_scan = selective_scan
    try:
        yield
    finally:
        mm.mamba_selective_scan = original
