"""Optional fused CUDA kernels for the discrete Mamba-2 mixer: mamba-ssm's Triton SSD scan and causal-conv1d.

The mixer uses them when they import *and* its tensors are on CUDA; the pure-PyTorch chunked scan
(:func:`gna.models.llamba.modeling.ssd_scan`) stays the CPU path and the reference the kernels are
tested against. Neither package builds without CUDA, so on a CPU machine :func:`kernels_for`
always answers ``None``. ``GNA_FUSED_KERNELS=0`` in the environment turns the kernels off (to
compare against the PyTorch path on a GPU, or to rule them out when debugging).

Everything that depends on the kernels' calling conventions lives in :func:`fused_ssd` and
:func:`fused_conv`, written after the cartesia / phi-mamba ``DiscreteMamba2.forward``:

- ``mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
  initial_states=None, seq_idx=None, dt_softplus=False, dt_limit=(0, inf), return_final_states=False)``
  with x (b, l, h, p), dt (b, l, h), A (h,), B, C (b, l, g, n) (head ``i`` reads group
  ``i // (h / g)``), computes ``s_t = exp(dt_t A) s_{t-1} + dt_t x_t B_t^T``, ``y_t = s_t C_t (+ D x_t)``
  (dt softplus'ed first when ``dt_softplus``) and returns ``y`` (b, l, h, p) in x's dtype, or
  ``(y, final_states (b, h, p, n))`` with ``return_final_states``;
- ``causal_conv1d_fn(x (b, d, l), weight (d, w), bias (d,), activation=None | "silu" | "swish")``
  -> (b, d, l), the depthwise causal conv (+ activation).
"""
from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import torch
import torch.nn.functional as F


@functools.cache
def _import_kernels() -> SimpleNamespace:
    """The kernel functions that import here (``None`` for the others). Cached: imports are slow."""
    try:  # any failure counts as absent: a CPU-only wheel imports partway, then misses selective_scan_cuda
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined as scan
    except Exception:
        scan = None
    try:
        from causal_conv1d import causal_conv1d_fn as conv
    except Exception:
        conv = None
    return SimpleNamespace(scan=scan, conv=conv)


_RAN: set[str] = set()  # the fused kernels that ran in this process (provenance: gna.jobs.script_job.provenance)


def ran() -> str:
    """Which fused kernels this process ran (``"conv+ssd"``, ``"ssd"``, ...), ``"none"`` if none."""
    return "+".join(sorted(_RAN)) or "none"


def on_cuda(t: torch.Tensor) -> bool:
    """Whether ``t`` lives where the Triton / CUDA kernels run (a function so tests can fake a GPU)."""
    return t.is_cuda


def kernels_for(t: torch.Tensor) -> SimpleNamespace | None:
    """The fused kernels usable on ``t``'s device (``.scan``, ``.conv``: each a function or None), or None."""
    if os.environ.get("GNA_FUSED_KERNELS", "1") == "0" or not on_cuda(t):
        return None
    found = _import_kernels()
    return found if (found.scan is not None or found.conv is not None) else None


# softplus(A_log) below this counts as this: x / softplus(A_log) stays finite (softplus underflows to
# 0 in float32 for A_log < -104), the kernel's dt x is still x, the decay exp(-dt) still 1.
DT_FLOOR = 1e-30


def fused_ssd(scan_fn, x: torch.Tensor, A_log: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk_size: int,
              return_final_state: bool = False):
    """The discrete Mamba-2 scan (without the D skip) through ``mamba_chunk_scan_combined``.

    x: (b, T, h, p), the value stream (conv output); A_log: (b, T, h), the raw in_proj slice
    (before softplus); B, C: (b, T, g, n) with g = n_qk_heads groups, *not* repeated per head.
    As the reference does, the kernel gets ``dt = softplus(A_log)``, ``A = -1`` and ``x / dt``: its
    ``dt x`` is then ``x`` and its decay ``exp(dt A) = exp(-softplus(A_log))``, the recurrence of
    :func:`~gna.models.llamba.modeling.ssd_scan` with ``log_a = -softplus(A_log)``. The reference
    passes ``A_log`` with ``dt_softplus=True``; here dt is computed once in float32, floored at
    :data:`DT_FLOOR` so the division cannot make inf (and NaN), and the kernel gets that same dt.
    Returns ``(y (b, T, h, p) in x's dtype, final state (b, h, p, n) float32 or None)``.
    """
    h = x.shape[2]
    dt = F.softplus(A_log.float()).clamp_min(DT_FLOOR)                  # (b, T, h)
    x_in = (x.float() / dt[..., None]).to(x.dtype)
    A = -torch.ones(h, device=x.device, dtype=torch.float32)
    out = scan_fn(x=x_in, dt=dt, A=A, B=B, C=C, chunk_size=chunk_size, dt_softplus=False,
                  return_final_states=return_final_state)
    _RAN.add("ssd")
    if return_final_state:
        y, final = out
        return y, final.float()
    return out, None


def conv_input(x: torch.Tensor, width: int) -> torch.Tensor | None:
    """x (b, d, l) in a layout ``causal_conv1d_fn`` accepts, or None where it cannot run.

    Its checks (causal-conv1d ``csrc/causal_conv1d.cpp``): ``width`` (taps) 2..4; ``stride(2) == 1``
    or ``stride(1) == 1``; a channel-last input (``stride(1) == 1``, ``stride(2) > 1``, as the
    transposed (b, l, d) slice of in_proj's output is) needs d, ``stride(0)`` and ``stride(2)``
    multiples of 8. A view that fails them is copied channel-first (contiguous (b, d, l), no
    alignment condition); a width outside 2..4 gets None (the PyTorch conv runs instead).
    """
    if not 2 <= width <= 4:
        return None
    channel_last = x.stride(1) == 1 and x.stride(2) > 1
    misaligned = channel_last and (x.shape[1] % 8 or x.stride(0) % 8 or x.stride(2) % 8)
    if misaligned or (x.stride(1) != 1 and x.stride(2) != 1):
        return x.contiguous()
    return x


def fused_conv(conv_fn, xBC: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               activation: str) -> torch.Tensor | None:
    """Depthwise causal conv (+ activation) through ``causal_conv1d_fn``.

    xBC: (b, T, conv_dim), the conv input; weight: (conv_dim, 1, d_conv), nn.Conv1d's layout;
    activation: "identity", "silu" or "swish". Returns (b, T, conv_dim), as the module's
    ``conv1d(xBC^T)[..., :T]^T`` followed by the activation; None where the kernel cannot run
    (see :func:`conv_input`).
    """
    x = conv_input(xBC.transpose(1, 2), weight.shape[-1])
    if x is None:
        return None
    act = None if activation == "identity" else activation
    out = conv_fn(x, weight.squeeze(1), bias, activation=act)  # (b, conv_dim, T)
    _RAN.add("conv")
    return out.transpose(1, 2)
