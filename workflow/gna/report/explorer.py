"""The head explorer: one self-contained HTML page per scanned model.

A tables-and-figures module of the experiment ``scan`` beside :mod:`.head_scan` (its ranking's table
and figure), kept apart as the page ``gna scan --html`` writes too.

The page holds the scan's ranking as a sortable, filterable table and, for each top head, its
token-mixing pattern on several probe prompts (attention weights; for SSM heads the materialised
mixing matrix of :func:`gna.patterns.mixing.mixing_matrices`, shown as :func:`display_matrix` scales it),
where hovering a query token highlights the keys it reads. Other scanned models can be shown in a
second pane beside it. Scripts and styles are inline and the data is embedded as JSON: the page
needs no server and no network.

Two steps, so that a model job computes only its own patterns: :func:`head_patterns` (model, probe
prompts, heads -> a JSON-able dict, ``results/scan/<model>.patterns.json``), then :func:`render`
(one or more of those dicts -> the HTML text; the first is the page's own model).
"""
from __future__ import annotations

import json
import math
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# The ranking's columns the table shows where the scan wrote them (the exact scan, the attribution
# estimate, the G&A classification); any other column stays in the CSV.
TABLE_COLUMNS = ("rank", "layer", "head", "kind", "role", "accuracy", "drop", "logprob_drop", "exact", "atp_drop",
                 "atp_magnitude", "gather_score", "aggregate_score")
ESTIMATE_WORDS = ("estimate", "fast")
# Provenance: how the ranking was made, read off its first row.
PROVENANCE_COLUMNS = ("model", "baseline_accuracy", "probe_check", "unknown_share", "chance_accuracy",
                      "config_hash", "fused_kernels")
WEIGHT_SCALE = 1000  # weights are stored as integers 0..1000 (three decimals): a smaller page


def display_matrix(matrix, kind: str):
    """A head's (T, T) mixing matrix as the pages and figures show it: attention weights as they are;
    an SSM head's by absolute value without the diagonal (the D skip term, which mixes nothing), each
    row scaled to sum 1 (as attention's rows do)."""
    if kind == "attention":
        return matrix
    mat = matrix.abs()
    mat.diagonal().zero_()
    return mat / mat.sum(-1, keepdim=True).clamp_min(1e-12)


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _rows(df: pd.DataFrame, columns) -> list[dict]:
    cols = [c for c in columns if c in df.columns]
    return [{c: _clean(v) for c, v in zip(cols, row)} for row in df[cols].itertuples(index=False)]


def heads_to_show(ranking: pd.DataFrame, ga: pd.DataFrame, top: int) -> list[tuple[int, int, str]]:
    """The ``top`` best-ranked heads, plus every head classified Gather or Aggregate."""
    heads = [(int(r.layer), int(r.head), str(r.kind)) for r in ranking.sort_values("rank").head(top).itertuples()]
    if "role" in ga.columns:
        heads += [(int(r.layer), int(r.head), str(r.kind)) for r in ga.sort_values("rank").itertuples()
                  if r.role in ("gather", "aggregate")]
    return list(dict.fromkeys(heads))


def head_patterns(model, tokenizer, prompts: list[str], heads: list[tuple[int, int, str]]) -> list[dict]:
    """Per prompt: its tokens and, per head, the displayed (T, T) matrix as integers 0..1000
    (``None`` for a head whose mixer has no materialised matrix, e.g. Mamba-1). One forward per
    prompt and mixer, whatever the number of its heads."""
    import torch

    from ..errors import InterventionError
    from ..patterns.mixing import mixing_matrices
    from ..models import describe

    desc = describe(model)
    device = next(model.parameters()).device
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt)["input_ids"]
        entry = {"tokens": tokenizer.convert_ids_to_tokens(ids), "matrices": {}}
        by_mixer: dict = {}
        for layer, head, kind in heads:
            by_mixer.setdefault((layer, kind), []).append(head)
        for (layer, kind), hs in by_mixer.items():
            try:
                mats = mixing_matrices(model, desc.mixer(layer, kind), torch.tensor([ids], device=device))[0]
            except InterventionError as e:
                for h in hs:
                    entry["matrices"][head_key(layer, h, kind)] = {"none": str(e)}
                continue
            for h in hs:
                mat = display_matrix(mats[h].float().cpu(), kind)
                entry["matrices"][head_key(layer, h, kind)] = (mat * WEIGHT_SCALE).round().int().tolist()
        out.append(entry)
    return out


def head_key(layer: int, head: int, kind: str) -> str:
    return f"L{layer}H{head} {kind}"


def explorer_data(name: str, ranking: pd.DataFrame, ga: pd.DataFrame, patterns: list[dict],
                  probe: str = "") -> dict:
    """Everything one model contributes to a page (JSON-able)."""
    table = ranking.drop(columns=[c for c in ("role",) if c in ranking.columns])
    if len(ga) and "role" in ga.columns:
        keep = [c for c in ("layer", "head", "kind", "role", "gather_score", "aggregate_score") if c in ga.columns]
        table = table.merge(ga[keep], on=["layer", "head", "kind"], how="left")
    table = table.sort_values("rank")
    # a fast scan's estimate, whatever the method names it, is shown beside the exact numbers
    columns = [c for c in TABLE_COLUMNS if c in table.columns] + [
        c for c in table.columns if c not in TABLE_COLUMNS and any(w in c for w in ESTIMATE_WORDS)]
    first = ranking.iloc[0] if len(ranking) else {}
    provenance = {c: _clean(first[c]) for c in ranking.columns
                  if c in PROVENANCE_COLUMNS or c.startswith(("v_", "method", "threshold"))}
    roles = {}
    for role in ("gather", "aggregate"):
        hits = table[table["role"] == role] if "role" in table else table.iloc[:0]
        roles[role] = [head_key(int(r.layer), int(r.head), str(r.kind)) for r in hits.itertuples()]
    return {"name": name, "probe": probe, "columns": columns,
            "ranking": _rows(table, columns), "roles": roles, "provenance": provenance,
            "patterns": patterns, "scale": WEIGHT_SCALE}


def _asset(name: str) -> str:
    return resources.files("gna.report").joinpath("explorer_assets", name).read_text()


def render(models: list[dict]) -> str:
    """The page: ``models[0]`` in the left pane, any model in the right one (default: the second)."""
    if not models:
        raise ValueError("the head explorer needs at least one scanned model")
    # "</" inside a <script> element would end it: escaped, the JSON reads the same.
    data = json.dumps(models, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    title = f"Head explorer: {models[0]['name']}"
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{_escape(title)}</title>\n"
            f"<style>\n{_asset('explorer.css')}</style>\n</head>\n<body>\n"
            f"<header><h1>{_escape(title)}</h1><p class=\"sub\">Heads ranked by single-head ablation on KV "
            "retrieval; each top head's token-mixing pattern on probe prompts. Hover a query token (left "
            "column of tokens) to see what it reads.</p></header>\n"
            "<main id=\"panes\"></main>\n"
            f"<script type=\"application/json\" id=\"gna-data\">{data}</script>\n"
            f"<script>\n{_asset('explorer.js')}</script>\n</body>\n</html>\n")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write(models: list[dict], path):
    """The page, written atomically."""
    from ..io import write_text
    return write_text(render(models), path)


def write_data(data: dict, path):
    """One model's data (``<model>.patterns.json``), compact and atomic: what :func:`render` takes."""
    from ..io import write_text
    return write_text(json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n", path)


def read_data(path) -> dict:
    from pathlib import Path
    return json.loads(Path(path).read_text())


def scan_files(name: str, model, tokenizer, examples: list[dict], ranking: pd.DataFrame, ga: pd.DataFrame, out_dir,
               *, top: int, n_prompts: int, probe: str, compare=()) -> list:
    """``gna scan --html``: explorer.html and patterns.json in ``out_dir`` (this model's data, for another
    scan's ``--compare``; ``compare``: those scans' directories), the ``top`` heads besides the roles'
    on the first ``n_prompts`` prompts."""
    from pathlib import Path

    heads = heads_to_show(ranking, ga, top)
    prompts = [e["prompt"] for e in examples[:n_prompts]]
    data = explorer_data(name, ranking, ga, head_patterns(model, tokenizer, prompts, heads), probe)
    others = [read_data(Path(d) / "patterns.json") for d in compare or ()]
    return [write([data] + others, Path(out_dir) / "explorer.html"), write_data(data, Path(out_dir) / "patterns.json")]
