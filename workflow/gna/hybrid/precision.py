"""Mixed-precision training of the student: fp32 master weights and optimizer state, low-precision compute.

A student built from a bf16 teacher is bf16. AdamW stepping bf16 weights rounds away every update
smaller than half a bf16 step (measured on the CPU, weights ~0.02: at lr 1e-5 the weights moved ~7x
less than in fp32, at 1e-6 ~100x less), so stage 3, the weight decay and the schedule's tail would be
near no-ops. :func:`master_weights` keeps the trainable state in float32 for the run and computes in the
model's own low precision under :func:`torch.autocast`, as mixed-precision training does (the weights,
their gradients and AdamW's moments are fp32; matmuls run in bf16 on bf16 copies made per forward).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
from torch import nn

LOW_PRECISION = (torch.bfloat16, torch.float16)


def compute_dtype(model: nn.Module) -> torch.dtype:
    """The dtype the model was loaded in (its first floating parameter's): what it computes in."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


@contextmanager
def master_weights(student: nn.Module):
    """For the duration: a low-precision ``student`` holds float32 weights (its masters, so the
    optimizer built inside steps and keeps fp32 state) and its forwards autocast to its own dtype.
    Yields the autocast context factory (a no-op for a float32 student). The student stays float32
    afterwards: casting the masters back would round away what a short run (or a small learning
    rate) accumulated; whoever loads the saved student picks its dtype (the workflow: the run's)."""
    dtype = compute_dtype(student)
    if dtype not in LOW_PRECISION:
        yield nullcontext
        return
    device = next(student.parameters()).device
    student.float()
    yield lambda: torch.autocast(device_type=device.type, dtype=dtype)
