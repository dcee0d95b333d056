"""A retrained micro model directory against the shipped one (the ``retrain_micro`` rule's report).

Bytes of ``model.safetensors`` first (identical or not, and by how much the tensors differ when
not), then whether the two runs were the same run: the resolved training configs, library
versions aside, and each run's steps, stop reason and final metrics.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..io import sha256_file


def compare_model_dirs(shipped: str | os.PathLike, retrained: str | os.PathLike) -> dict[str, Any]:
    """Compare a retrained micro model directory with the shipped one: the sha256 of
    ``model.safetensors`` (``identical`` when equal), the largest absolute difference of any
    tensor when not, whether the resolved training configs agree (library versions aside),
    and both runs' steps, stop reason and final metrics."""
    a, b = Path(shipped), Path(retrained)
    out: dict[str, Any] = {"shipped": str(a), "retrained": str(b)}
    ha, hb = sha256_file(a / "model.safetensors"), sha256_file(b / "model.safetensors")
    out.update(sha256_shipped=ha, sha256_retrained=hb, identical=ha is not None and ha == hb)
    if ha and hb and ha != hb:
        from safetensors.torch import load_file
        ta, tb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
        if set(ta) != set(tb):
            out["max_abs_diff"] = None
            out["tensor_names_differ"] = sorted(set(ta) ^ set(tb))
        else:
            out["max_abs_diff"] = max(float((ta[k].float() - tb[k].float()).abs().max()) if ta[k].shape == tb[k].shape
                                      else float("inf") for k in ta)

    def read(d: Path, name: str) -> dict:
        p = d / name
        return json.loads(p.read_text()) if p.is_file() else {}

    ca, cb = read(a, "train_config.json"), read(b, "train_config.json")
    for c in (ca, cb):   # display-only: the progress bar does not change the training
        c.get("train", {}).pop("progress", None)
    out["versions_shipped"], out["versions_retrained"] = ca.pop("versions", None), cb.pop("versions", None)
    out["same_config"] = bool(ca) and ca == cb
    for tag, d in (("shipped", a), ("retrained", b)):
        s = read(d, "train_summary.json")
        out[f"steps_{tag}"], out[f"stopped_{tag}"] = s.get("steps"), s.get("stopped")
        out[f"seconds_{tag}"], out[f"metrics_{tag}"] = s.get("seconds"), s.get("metrics")
    return out
