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
        L, b, d = dt.shape
        gy = gy.contiguous()
        gdt, gdtx = torch.zeros_like(dt), torch.empty_like(dtx)
        gB, gC = torch.empty_like(B), torch.empty_like(C)
        gA = torch.zeros_like(A)
        g = None                                         # dLoss/dh_t through all later steps
        dA_next = None
        for t in range(L - 1, -1, -1):
            G = gy[t].unsqueeze(-1) * C[t].unsqueeze(1)
            g = G if g is None else torch.addcmul(G, dA_next, g)
            gC[t] = torch.bmm(gy[t].unsqueeze(1), hs[t]).squeeze(1)
            gdtx[t] = torch.bmm(g, B[t].unsqueeze(-1)).squeeze(-1)
            gB[t] = torch.bmm(dtx[t].unsqueeze(1), g).squeeze(1)
            dA = torch.exp(dt[t].unsqueeze(-1) * A)
            if t > 0:                                    # through dA_t = exp(dt_t A); h_{-1} = 0
                q = g * hs[t - 1] * dA
                gdt[t] = (q * A).sum(-1)
                gA += (q * dt[t].unsqueeze(-1)).sum(0)
            dA_next = dA
        return gdt, gA, gB, gC, gdtx


_ORIGINAL: dict[str, object] = {}


def selective_scan(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False, **kw):
    """Drop-in for ``transformers.models.mamba.modeling_mamba.mamba_selective_scan`` (same
    arguments and result; ``hidden_states``/``dt``: (b, d, L), ``B``/``C``: (b, n, L))."""
    if return_last_state:   # a forward that fills a cache (generation): transformers' own path
        return _ORIGINAL["scan"](hidden_states, dt, A, B, C, D=D, z=z, delta_bias=delta_bias,
                                 delta_softplus=delta_softplus, return_last_state=True, **kw)
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
    forward without a cache; with one, transformers' path runs); transformers' own function is
    restored on exit."""
    if not enabled:
        yield
        return
    from transformers.models.mamba import modeling_mamba as mm
    original = mm.mamba_selective_scan
    _ORIGINAL.setdefault("scan", original)
    mm.mamba_selective_scan = selective_scan
    try:
        yield
    finally:
        mm.mamba_selective_scan = original
