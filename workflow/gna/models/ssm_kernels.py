"""No silent slow path: an SSM model on CUDA without its fused kernels is refused at load.

transformers' Mamba / Mamba-2 / Zamba2 (and the hybrids built on them) and gna's Llamba fall back
to a pure-PyTorch scan when mamba-ssm or causal-conv1d does not import, with at most a warning.
At paper scale that path is not a detail: it materialises the chunked scan's tensors in the
activations' dtype (one Llamba layer at 256 rows: 10.3 GB against the 2.9 GB the fused kernels
need, about 3.5x) and runs several times slower (the plan's ``pytorch_ssm_*`` factors, which
``snakemake plan`` prints beside every SSM job). So on CUDA a job stops at start with one line
naming the missing package and the setting that allows the PyTorch path anyway:
``GNA_FUSED_KERNELS=0`` (the same switch that turns the kernels off where they do import).
On the CPU the PyTorch path is the only one and nothing is checked.
"""
from __future__ import annotations

import functools
import importlib
import os

from ..errors import DeviceError

# model_type -> the packages whose kernels its fast path needs (module to import, pip name)
_MAMBA_SSM = ("mamba_ssm", "mamba-ssm")
_CONV = ("causal_conv1d", "causal-conv1d")
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    t: (_MAMBA_SSM, _CONV) for t in ("mamba", "falcon_mamba", "mamba2", "zamba", "zamba2", "jamba", "bamba",
                                     "granitemoehybrid", "nemotron_h", "falcon_h1", "llamba", "gna_hybrid")
}
ALLOW = "GNA_FUSED_KERNELS=0"


@functools.cache
def importable(module: str) -> bool:
    """Whether ``module`` imports (any failure counts: a CPU wheel of mamba-ssm imports partway)."""
    try:
        importlib.import_module(module)
    except Exception:
        return False
    return True


def missing_kernels(model_type: str) -> list[str]:
    """The pip names of the fused-kernel packages ``model_type`` needs that do not import here."""
    return [pip for module, pip in NEEDS.get(model_type, ()) if not importable(module)]


def require_fused_kernels(model_type: str | None, device: str, where: str) -> None:
    """Refuse an SSM ``model_type`` on a CUDA ``device`` whose fused kernels do not import, unless
    ``GNA_FUSED_KERNELS=0`` asks for the PyTorch path; ``where`` names the model in the message."""
    if not model_type or not str(device).startswith("cuda") or os.environ.get("GNA_FUSED_KERNELS", "1") == "0":
        return
    missing = missing_kernels(model_type)
    if missing:
        raise DeviceError(f"{where}: a {model_type} model on {device} without {' and '.join(missing)} runs the "
                          f"PyTorch SSM scan (~3.5x the activation memory and several times the time the plan "
                          f"counts); install {' '.join(missing)}, or set {ALLOW} to allow the PyTorch path")
