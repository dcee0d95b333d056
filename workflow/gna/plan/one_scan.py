"""The plan's estimate of one ``gna scan``, said before the scan starts: the head scan's seconds by
:func:`gna.plan.estimate.head_scan` for the model's shape, the probe and the device."""
from __future__ import annotations

from . import estimate as E


def duration(seconds: float) -> str:
    return (f"{max(1.0, seconds):.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400
            else f"{seconds / 3600:.1f} h")


def scan_estimate_line(name: str, config: dict, *, family: str | None, dtype: str, device: str, n_examples: int,
                       tokens: int, n_pairs: int, **scan) -> str:
    """One line: what the scan of the model with config.json ``config`` takes by the plan, on the plan's
    GPU (an H100 in bf16) where ``device`` is CUDA, else on one CPU core at the measured rate for
    ``dtype``. ``scan``: :func:`gna.plan.estimate.head_scan`'s settings (method, batch_size, ...)."""
    from .model_shapes import model_info
    from .scan_methods import cpu_hardware

    try:
        info = model_info(name, config, family, "bfloat16" if dtype == "auto" else dtype)
    except Exception as e:  # advisory only: a config the meta device cannot build gets no estimate
        return f"plan estimate: none for this model ({type(e).__name__})"
    gpu = str(device).startswith("cuda")
    hw = E.Hardware() if gpu else cpu_hardware(E.Hardware(), dtype, "head ablations")
    secs, peak = E.head_scan(hw, info, n_examples, n_pairs, tokens=tokens, **scan)
    where = (f"on an H100 in bf16 (the plan's GPU), peak {peak / E.GB:.1f} GB" if gpu else
             f"on one CPU core in {dtype} (the plan's measured rate; more threads take less)")
    return (f"plan estimate: the {scan.get('method', 'exact')} scan of {info.n_heads_total} heads on {n_examples} "
            f"prompts of ~{tokens} tokens takes about {duration(secs)} {where}")
