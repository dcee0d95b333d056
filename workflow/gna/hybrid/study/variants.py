"""The hybrid students of a study, by name: ``k{k}-s{state}-ranked`` (top-k of the KV ranking) and
``k{k}-s{state}-random{draw}`` (k random heads drawn with seed ``draw``). The workflow makes the
names from the config (:func:`distill_variants`), the evaluation and the plan read them back
(:func:`parse_variant`): one pattern for both. No torch: the workflow calls it when parsed."""
from __future__ import annotations

import re
from typing import NamedTuple

VARIANT = re.compile(r"k(\d+)-s(\d+)-(ranked|random)(\d*)")
WILDCARD = r"k\d+-s\d+-(ranked|random\d+)"
"""The Snakemake wildcard constraint of a variant name."""


class Variant(NamedTuple):
    k: int
    state: int
    selection: str     # "ranked" or "random"
    draw: int | None   # the random heads' seed (random students only)


def variant_name(k: int, state: int, selection: str, draw: int | None = None) -> str:
    return f"k{k}-s{state}-{selection}{'' if draw is None else draw}"


def parse_variant(name: str) -> Variant:
    m = VARIANT.fullmatch(name)
    if m is None:
        raise ValueError(f"{name!r} is not a hybrid student's name (k<k>-s<state>-ranked | -random<draw>)")
    k, state, selection, draw = m.groups()
    return Variant(int(k), int(state), selection, int(draw) if draw else None)


def distill_variants(d: dict) -> list[str]:
    """The students of a ``hybrid_distillation`` config (validated: the schema's defaults filled in;
    ``{}``: none), in order: the k sweep at ``state_size``, the state sweep at ``state_k`` (where
    ``state_sizes`` is set), and the random control (``random_heads``: true for every k > 0, or the k
    to do it for) with one student per draw of ``random_seeds``."""
    if not d:
        return []
    state = d["state_size"]
    random_ks = d["random_heads"]
    random_ks = [k for k in d["k"] if k > 0] if random_ks is True else list(random_ks or [])
    names = ([variant_name(k, state, "ranked") for k in d["k"]]
             + [variant_name(d.get("state_k"), st, "ranked") for st in d.get("state_sizes", [])]
             + [variant_name(k, state, "random", draw) for k in random_ks for draw in d["random_seeds"]])
    return list(dict.fromkeys(names))
