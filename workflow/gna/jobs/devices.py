"""Is the device a job asks for (config key ``device``) on this machine? Checked when a model job
starts, before anything is loaded, so a wrong ``device: cuda`` fails in a second with a message
naming the key and what the machine has, not minutes later inside transformers.

Deliberately *not* checked when the workflow is parsed: on a cluster the login node that parses
the workflow may have no GPU while the jobs it submits do.
"""
from __future__ import annotations

from ..errors import DeviceError


def _has_mps(torch) -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available(torch=None) -> str:
    """What this torch can run on, in words, e.g. ``torch 2.13.0+cpu, CPU only`` or
    ``torch 2.5.1+cu124, 2 CUDA devices (cuda:0..cuda:1)``."""
    if torch is None:
        import torch
    where = []
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        where.append(f"{n} CUDA device{'s' if n != 1 else ''} (cuda:0..cuda:{n - 1})")
    elif torch.version.cuda:
        where.append(f"built for CUDA {torch.version.cuda} but no GPU visible")
    if _has_mps(torch):
        where.append("MPS")
    return f"torch {torch.__version__}, " + (", ".join(where) if where else "CPU only")


def check_device(device: str, key: str = "device", torch=None) -> str:
    """The device string to use for ``device`` (``auto`` -> ``cuda`` if there is one, else ``cpu``);
    :class:`DeviceError` naming ``key`` if this machine cannot run on it. ``torch`` is injectable
    for tests (a fake CUDA machine)."""
    if torch is None:
        import torch
    device = str(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if _has_mps(torch) else "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise DeviceError(f"{key}: {device!r} is not a device torch knows (cpu, cuda, cuda:N, mps, auto)") from None
    if dev.type == "cpu":
        return device
    fix = "; set device: cpu" if key == "device" else "; use cpu"
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "has no CUDA" if not torch.version.cuda else "sees no GPU"
            raise DeviceError(f"{key}: {device}, but torch here {why} ({available(torch)}){fix}")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise DeviceError(f"{key}: {device}, but this machine has {n} CUDA device{'s' if n != 1 else ''} "
                              f"({available(torch)})")
        return device
    if dev.type == "mps":
        if not _has_mps(torch):
            raise DeviceError(f"{key}: {device}, but torch here has no MPS ({available(torch)}){fix}")
        return device
    raise DeviceError(f"{key}: {device}: the pipeline runs on cpu, cuda or mps ({available(torch)})")
