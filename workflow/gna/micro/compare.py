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


def comparison(models: list[str], retrained: list[str], data_dir: str | os.PathLike, shipped_dir: str | os.PathLike,
               shipped_data: str | os.PathLike) -> tuple[dict, str]:
    """The retrained micro models (``retrained``, one folder per name of ``models``) and task files
    (``data_dir``) against the shipped ones, byte for byte: the json the rule writes, and its markdown."""
    rows = [{"model": name, **compare_model_dirs(Path(shipped_dir) / name, path)}
            for name, path in zip(models, retrained)]
    data = [{"file": f.name, "identical": sha256_file(f) == sha256_file(Path(shipped_data) / f.name)}
            for f in sorted(x for x in Path(data_dir).iterdir() if not x.name.startswith("."))]
    lines = ["# Retrained micro models against the shipped ones", "",
             "| model | identical | sha256 (shipped) | sha256 (retrained) | steps shipped / retrained | "
             "max abs diff | same config |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {'yes' if r['identical'] else 'NO'} | `{(r['sha256_shipped'] or '-')[:16]}` | "
                     f"`{(r['sha256_retrained'] or '-')[:16]}` | {r['steps_shipped']} / {r['steps_retrained']} | "
                     f"{r.get('max_abs_diff', 0.0) if not r['identical'] else 0} | {r['same_config']} |")
    lines += ["", f"Task files identical to data/micro/tasks: {sum(d['identical'] for d in data)} of {len(data)}"
              + "".join(f"; {d['file']} differs" for d in data if not d["identical"]), "",
              "Bytes match only with the same seed, config, library versions and kind of CPU; the versions "
              "used are in each model's train_config.json."]
    return {"models": rows, "data": data}, "\n".join(lines) + "\n"
