"""The head scan as the pipeline's ``head_scan`` rule and the ``gna scan`` command both run it.

One routine, :func:`head_scan`: check that the probe means something for the model, rank every
head (``scan.method``, :func:`gna.scan.scan`), classify the top heads that have a token-mixing
matrix as Gather or Aggregate (:func:`gna.patterns.ga_roles.classify_heads`), keep a role only
where the head's drop is beyond noise (:func:`gna.questions.roles.roles_beyond_noise`). Its
settings are the study config's ``scan`` keys, passed by name without defaults: the schema
(workflow/schemas/config.schema.yaml) holds them, for the pipeline and the command alike.

The computation layer of the experiment ``scan``. One concept at three layers: this module ranks the
heads, :mod:`gna.report.head_scan` draws the ranking, :mod:`gna.report.findings.head_scan` judges it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd
from torch import nn

from ..jobs.script_job import provenance
from ..models import attention_only, describe
from ..patterns.ga_roles import classify_heads
from ..patterns.mixing import has_mixing_matrix
from ..probes.guard import ProbeCheck, check_probe
from ..probes.kv import probe_sha256
from ..probes.scoring import encode
from ..questions.roles import roles_beyond_noise
from ..scan import ScanGuard, scan, top_k


def takes_tree_masks(model: nn.Module) -> bool:
    """Does every mixer of ``model`` take packed rows' 4-D mask and positions: transformers' own
    attention, eager or sdpa (flash attention reads no mask of that shape; a recurrence has none)?"""
    return (type(model).__module__.startswith("transformers.") and attention_only(model)
            and getattr(model.config, "_attn_implementation", None) in ("eager", "sdpa"))


@dataclass(frozen=True)
class HeadScan:
    """A scan's outputs. ``ranking``: every head ranked, with the probe check's columns, the probe's
    sha256 and the run's provenance; ``ga``: the classified top heads (the ranking's columns plus
    their scores and role), by rank; ``guard``: how far the ranking was verified; ``probe``: the
    probe check (baseline, chance, forced); ``top``: the heads classified, ``(layer, head, kind)``;
    ``unclassified``: mixer kinds ranked but not classified (no token-mixing matrix is read for them)."""
    ranking: pd.DataFrame
    ga: pd.DataFrame
    guard: ScanGuard
    probe: ProbeCheck
    top: list[tuple[int, int, str]]
    unclassified: list[str]


def head_scan(model: nn.Module, tokenizer, examples: list[dict], *, model_name: str, method: str, batch_size: int,
              max_rows: int, shared_prefix: bool, classify_top: int, classify_examples: int, threshold: float, probe_check: dict,
              atp: dict, what: str, say: Callable[[str], None]) -> HeadScan:
    """Scan ``model`` on the probe ``examples`` (see the module docstring).

    ``probe_check``: ``scan.probe_check`` (max_unknown_share, min_over_chance, force); ``atp``:
    the ``atp+exact`` settings (candidates, guard_sample, guard_k, guard_level, atp_score,
    graddrop, seed); ``what`` names the probe in the check's refusal; ``say`` takes the lines said
    before the work (the guard's cost, kinds that cannot be classified). ``shared_prefix``: packed
    rows (:mod:`gna.probes.batches`) where the model's attention takes them, said where it does not."""
    packed = shared_prefix and takes_tree_masks(model)
    if shared_prefix and not packed:
        say("scan.shared_prefix: this model has a mixer other than eager or sdpa attention; a row per continuation")
    encoded = encode(examples, tokenizer, packed=packed)
    checked = check_probe(model, tokenizer, encoded, batch_size=batch_size, what=what,
                          fmt=examples[0].get("fmt") if examples else None, **probe_check)
    mixers = describe(model).mixers
    classifiable = sorted({m.kind for m in mixers if has_mixing_matrix(m)})
    unclassified = sorted({m.kind for m in mixers} - set(classifiable))
    if unclassified and classify_top:  # said now, not after the scan
        say(f"G&A roles: {', '.join(unclassified)} heads are ranked but not classified (no token-mixing matrix is "
            f"read for {', '.join(unclassified)} mixers); ga.csv holds the top "
            f"{', '.join(classifiable) or 'none: no classifiable'} heads")
    ranking, guard = scan(model, encoded, method=method, batch_size=batch_size, baseline=checked.baseline,
                          max_rows=max_rows, model_name=model_name, say=say, **atp)
    ranking = ranking.assign(**checked.columns())
    ranking = ranking.assign(probe_sha256=probe_sha256(examples))  # the exact prompts it ranked on
    n_classifiable = int(ranking["kind"].isin(classifiable).sum())
    top = top_k(ranking, min(classify_top, n_classifiable), kinds=classifiable)
    ga = classify_heads(model, tokenizer, examples[:classify_examples], top, threshold=threshold)
    ga = roles_beyond_noise(model, encoded, ga, n_heads=len(ranking), baseline=checked.baseline, ranking=ranking,
                            batch_size=batch_size, max_rows=max_rows)
    ranking = ranking.assign(**provenance())  # after the scan: which fused kernels it ran
    ga = ranking.merge(ga, on=["layer", "head", "kind"]).sort_values("rank")
    return HeadScan(ranking=ranking, ga=ga, guard=guard, probe=checked, top=top, unclassified=unclassified)
