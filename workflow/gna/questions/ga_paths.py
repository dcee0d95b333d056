"""The G-to-A matrix: every top Gather below every top Aggregate, path patched by component and
position (:mod:`.paths`), with the direct path to the logits and plain ablation beside it, each drop
with a bootstrap interval over prompts.

Rows are long: one per (sender, receiver, ``via``, ``components``, ``positions``); ``target`` says
whether the path ends in a head (``head``) or in the logits (``logits``: the sender's own write to
the LM head, receiver ``logits``), so the two cannot be read for each other.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from torch import nn

from ..errors import InterventionError
from ..probes.encoded import EncodedProbe
from ..probes.scoring import score
from .head_sets import ablate_sets
from .names import SPECS
from .null import bootstrap_means, interval
from .paths import path_patch, path_to_logits

def _with_drops(rows: pd.DataFrame, out) -> pd.DataFrame:
    """``drop`` (accuracy), its bootstrap interval over prompts, ``margin_drop``."""
    diff = out.base_right[None, :].astype(float) - out.right.astype(float)   # (I, N)
    low, high = interval(bootstrap_means(diff))
    return rows.assign(drop=rows.baseline_accuracy - rows.accuracy, drop_low=np.atleast_1d(low),
                       drop_high=np.atleast_1d(high), margin_drop=rows.baseline_margin - rows.margin)


def ga_matrix(model: nn.Module, encoded: EncodedProbe, gathers, aggregates, values=None, model_name: str = "",
              specs=SPECS, **batching) -> pd.DataFrame:
    """Every Gather below every Aggregate through every spec of ``specs``, each Gather's direct path to
    the logits, and beside each row the drops of ablating its sender and its receiver whole
    (``sender_ablated_drop``, ``receiver_ablated_drop``) and the share of the sender's whole drop the
    path carries (``share_of_sender``). ``values``: the value tokens' positions per example
    (:func:`gna.questions.paths.value_positions`), for the specs at ``values``."""
    paths = [(g, a) for g in gathers for a in aggregates if g[0] < a[0]]
    if not paths:
        return pd.DataFrame()
    baseline = score(model, encoded, batch_size=batching.get("batch_size", 32))
    parts = []
    for via, comps, positions in specs:
        if positions == "values" and values is None:
            continue
        rows, out = path_patch(model, encoded, paths, baseline=baseline, via=via, components=comps,
                               positions=positions, values=values, outcomes=True, **batching)
        parts.append(_with_drops(rows, out))
    senders = list(dict.fromkeys(g for g, _ in paths))
    rows, out = path_to_logits(model, encoded, senders, baseline=baseline, outcomes=True, **batching)
    parts.append(_with_drops(rows, out))
    rows, out = ablate_sets(model, encoded, [[h] for h in dict.fromkeys([p for pair in paths for p in pair])],
                            baseline=baseline, outcomes=True, **batching)
    whole = _with_drops(rows, out).set_index("heads")
    table = pd.concat(parts, ignore_index=True)
    table["sender_ablated_drop"] = [whole.loc[s, "drop"] for s in table.sender]
    table["sender_ablated_low"] = [whole.loc[s, "drop_low"] for s in table.sender]
    table["sender_ablated_high"] = [whole.loc[s, "drop_high"] for s in table.sender]
    table["receiver_ablated_drop"] = [whole.loc[r, "drop"] if r in whole.index else np.nan for r in table.receiver]
    table["share_of_sender"] = table["drop"] / table.sender_ablated_drop.where(table.sender_ablated_drop > 0)
    return table.assign(model=model_name)


def top_roles(ga: pd.DataFrame, n_gather: int, n_aggregate: int) -> tuple[list, list]:
    """The top ``n_gather`` heads classified Gather and ``n_aggregate`` classified Aggregate (attention
    heads, in rank order) of the scan's classified top heads (``<model>.ga.csv``)."""
    ga = ga[ga.kind == "attention"].sort_values("rank")
    pick = lambda role, n: [(int(r.layer), int(r["head"]), "attention") for _, r in ga[ga.role == role].head(n).iterrows()]  # noqa: E731
    gathers, aggregates = pick("gather", n_gather), pick("aggregate", n_aggregate)
    if not gathers or not aggregates:
        raise InterventionError(f"path patching needs a Gather and an Aggregate attention head among the classified "
                                f"top heads; found {len(gathers)} Gather, {len(aggregates)} Aggregate")
    return gathers, aggregates
