"""Is a KV probe large enough for what the fast scan's output claims? ``gna scan`` says so at the start.

The fast scan's recall (``--method atp+exact`` finds the exact scan's top-10 beyond noise with about
9% of the heads ablated: docs/fast-scan.md) was measured on probes that resolve that top-10: on a
small probe few heads clear the noise bar, so the ranking the scan prints past them is noise,
whatever the estimator's order. ``benchmarks/atp_recall_probe_size.py`` measured it per probe size on
the validation models (probe seed 0, compact format): :data:`MEASURED` holds, per model and probe
(pairs, prompts), the share of the reference's exact top-10 beyond noise (the largest probe of those
pairs: 1,000 prompts at 8 pairs, 2,000 at the benchmark's own) that the probe's own exact scan finds
beyond noise. At 64 prompts it is 0.1-0.29, at 256 0.43-0.7; the estimator's order ranked those heads
within gna scan's default budget at every size. Tests hold :data:`MEASURED` to the benchmark's table.
"""
from __future__ import annotations

TARGET_SHARE = 0.9
FAST_METHODS = ("atp", "atp+exact")
MEASURED: dict[tuple[str, int, int], float] = {
    ("val-llama", 8, 64): 0.2857,
    ("val-llama", 8, 256): 0.4286,
    ("val-llama", 8, 1000): 1,
    ("val-llama", 24, 64): 0.2222,
    ("val-llama", 24, 256): 0.4444,
    ("val-llama", 24, 2000): 1,
    ("val-bamba", 8, 64): 0.1,
    ("val-bamba", 8, 256): 0.6,
    ("val-bamba", 8, 1000): 1,
    ("val-bamba", 16, 64): 0.1,
    ("val-bamba", 16, 256): 0.7,
    ("val-bamba", 16, 2000): 1,
}
"""(model, pairs, prompts) -> the share of the reference's exact top-10 beyond noise this probe resolves."""


def prompts_needed(measured: dict | None = None) -> int | None:
    """The fewest prompts at which every measured model resolved TARGET_SHARE (at some pairs), or None."""
    measured = MEASURED if measured is None else measured
    models = {m for m, _, _ in measured}
    cells = {(p, n) for _, p, n in measured}
    ok = [n for p, n in cells if all(measured.get((m, p, n), 0.0) >= TARGET_SHARE for m in models)]
    return min(ok) if ok else None


def probe_size_warning(method: str, pairs: int, n_examples: int, measured: dict | None = None) -> str | None:
    """One line for the start of a fast scan whose probe is smaller than its recall needs; None otherwise."""
    measured = MEASURED if measured is None else measured
    if method not in FAST_METHODS or not measured:
        return None
    need = prompts_needed(measured)
    if need is not None and n_examples >= need:
        return None
    below = [(n, r) for (_, _, n), r in measured.items() if n <= n_examples]
    seen = ""
    if below:
        n0 = max(n for n, _ in below)
        shares = [r for n, r in below if n == n0]
        seen = f" (on the validation models a probe of {n0} prompts resolved {min(shares):.0%}-{max(shares):.0%} of it)"
    want = f"at least {need:,} prompts" if need else "more prompts than any measured"
    return (f"warning: a probe of {n_examples} prompts x {pairs} pairs is too small for the fast scan's recall: its "
            f"exact top-10 is mostly within noise{seen}; the recall in docs/fast-scan.md (Probe size) was measured "
            f"on probes that resolve it, {want}. Use --n-examples, or read only the heads beyond noise.")
