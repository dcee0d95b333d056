"""Is a KV probe large enough for the recall the fast scan claims? ``gna scan`` says so at the start.

The fast scan's recall (``--method atp+exact`` finds the exact scan's top heads beyond noise with a
few heads ablated: docs/fast-scan.md) was measured per probe size on the validation models
(``benchmarks/atp_recall_probe_size.py``, probe seed 0, compact format). :data:`MEASURED` holds, per
model and probe (pairs x prompts), the share of the reference top-10 beyond noise (the exact scan's
on the largest probe of those pairs) that the default budget (16 candidates + 8 guard heads) ablates.
A probe with fewer prompts than the smallest measured size where every model reached
:data:`TARGET_RECALL` is too small for that claim; tests hold :data:`MEASURED` to the benchmark's table.
"""
from __future__ import annotations

TARGET_RECALL = 0.9
FAST_METHODS = ("atp", "atp+exact")
# (model, pairs, prompts) -> recall of the reference top-10 beyond noise at gna scan's default budget
MEASURED: dict[tuple[str, int, int], float] = {}


def prompts_needed(measured: dict | None = None) -> int | None:
    """The fewest prompts at which every measured model reached TARGET_RECALL (any pairs), or None."""
    measured = MEASURED if measured is None else measured
    sizes = sorted({(p, n) for _, p, n in measured})
    models = {m for m, _, _ in measured}
    ok = [n for p, n in sizes if all(measured.get((m, p, n), 0.0) >= TARGET_RECALL for m in models)]
    return min(ok) if ok else None


def probe_size_warning(method: str, pairs: int, n_examples: int, measured: dict | None = None) -> str | None:
    """One line for the start of a fast scan whose probe is smaller than its recall needs; None otherwise."""
    measured = MEASURED if measured is None else measured
    if method not in FAST_METHODS or not measured:
        return None
    need = prompts_needed(measured)
    if need is not None and n_examples >= need:
        return None
    near = sorted({(abs(p - pairs), n) for _, p, n in measured if n <= n_examples})
    seen = ""
    if near:
        n0 = near[0][1]
        p0 = min((p for _, p, n in measured if n == n0), key=lambda p: abs(p - pairs))
        seen = " (at " + f"{p0} pairs x {n0} prompts: " + ", ".join(
            f"{m} {r:.2f}" for (m, p, n), r in sorted(measured.items()) if (p, n) == (p0, n0)) + ")"
    want = f"at least {need} prompts" if need else "more prompts than any measured"
    return (f"warning: a probe of {n_examples} prompts x {pairs} pairs is too small for the fast scan's recall: "
            f"on the validation models the default budget found under {TARGET_RECALL:.0%} of the exact top-10 "
            f"beyond noise{seen}; its recall needs {want} (docs/fast-scan.md, Probe size). Use --n-examples or "
            f"--method exact.")
