"""Table 1's computation: the minimal model, in its G&A layers only the Gather and/or Aggregate heads kept (or
none). The heads come from :func:`gna.experiments.head_selection.keeping_roles`: the config's named ones (the
paper's), the discovered ones (in each critical layer the head(s) whose removal alone costs MMLU most, rule
critical_heads), or the KV scan's top Gather and top Aggregate-pattern heads (head_keeping.scan_heads).

The computation layer of the experiment ``head_keeping`` (its rules head_keeping and critical_heads); its
table is :mod:`gna.report.heads`', its claim checks :mod:`gna.report.findings.heads`' (the head experiments'
family modules)."""
from __future__ import annotations

import logging

import pandas as pd

from ..models import describe, load_model
from .head_selection import head_names, keeping_plan, keeping_roles, no_critical_note, unclassified
from .pruning import metric_by
from .run import condition_rows as condition_rows_of, evaluation_rows


def condition_rows(source: str, condition: str, minimal: dict, critical: dict, heads: pd.DataFrame | None,
                   ga: pd.DataFrame | None, *, spec: dict, tasks: list[str], named: dict | None, per_layer: int,
                   fields: dict, eval: dict, micro_data: str | None, heads_by: str = "role",
                   threshold: float | None = None, log: logging.Logger) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The rows and answers of one (source, condition) on the minimal model (``minimal``: minimal_model's
    json; ``critical``: critical_layers'). ``heads``: the discovered heads' per-head MMLU (critical_heads'
    table, None for other sources); ``ga``: the scan's classified heads (None where not read). A condition
    that cannot be run is one row saying why (``note``) and no answers."""
    depth, layers, answers = minimal["minimal_depth"], critical["table1_layers"], []
    search = {}
    if heads is not None and layers:   # the discovered heads' search
        search = dict(scores=metric_by(heads, ["layer", "head"], tasks[:1]).rename("mmlu").reset_index(),
                      kind=str(heads.kind.dropna().iloc[0]))
    roles, note = keeping_roles(source, condition, depth, layers=layers, per_layer=per_layer, named=named, ga=ga,
                                none=no_critical_note(critical), heads_by=heads_by, threshold=threshold, **search)
    if note:
        log.info("%s heads, %s: %s (minimal model of depth %d): nothing to evaluate", source, condition, note, depth)
        return pd.DataFrame([{**fields, **{role: head_names(hs) for role, hs in (roles or {}).items()},
                              "kept": "nothing", "note": note}]), answers
    too_deep = [h for hs in roles.values() for h in hs if int(h[0]) >= depth]
    if too_deep:
        raise ValueError(f"head_keeping: heads {too_deep} lie outside the minimal model (layers 0..{depth - 1})")
    keep, kept = keeping_plan(roles, condition)
    log.info("%s heads %s; kept %s", source, roles, kept)
    # a scan head picked by its pattern that the ranking left unclassified
    loose = " ".join(h for role, hs in roles.items() for h in unclassified(ga if source == "scan" else None, hs, role))
    rows = evaluation_rows(spec, tasks, [{"truncate": depth}, *keep], eval, micro_data,
                           {**fields, "gather": head_names(roles["gather"]),
                            "aggregate": head_names(roles["aggregate"]),
                            "kept": " ".join(f"{k}:{v}" for k, v in kept.items()), "unclassified": loose},
                           answers=answers)
    return rows, answers


def head_search_rows(minimal: dict, critical: dict, *, spec: dict, tasks: list[str], fields: dict, eval: dict,
                     micro_data: str | None, log: logging.Logger) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Table 1's head search (rule critical_heads): each head of its critical layers (one or two) ablated
    alone in the minimal model, on MMLU; one row saying why where no layer is critical."""
    depth, layers, answers = minimal["minimal_depth"], critical["table1_layers"], []
    if not layers:
        note = no_critical_note(critical)
        log.info("%s: no head to search", note)
        return pd.DataFrame([{**fields, "layer": pd.NA, "head": pd.NA, "note": note}]), answers
    model = load_model(spec)
    conditions, condition_fields = [], []
    for layer in layers:
        mixers = describe(model[0]).mixers_in(layer)   # a hybrid layer: its attention heads
        mixer = next((m for m in mixers if m.kind == "attention"), mixers[0])
        for head in range(mixer.n_heads):
            conditions.append([{"truncate": depth}, {"ablate_heads": [[layer, head, mixer.kind]]}])
            condition_fields.append({**fields, "layer": layer, "head": head, "kind": mixer.kind})
    # one request batch at a time, the layers below each head's layer run once for all heads
    frames = condition_rows_of(spec, tasks, conditions, eval, micro_data, condition_fields, model=model,
                               answers=answers)
    for f, rows in zip(condition_fields, frames):
        log.info("L%dH%d removed: %s", f["layer"], f["head"],
                 rows[rows.metric == "acc"][["task", "value"]].to_string(index=False, header=False))
    return pd.concat(frames, ignore_index=True), answers
