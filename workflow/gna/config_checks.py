"""Checks of a study config that JSON Schema cannot express, run when Snakemake parses the
workflow, so a bad value is refused before any job starts. Imports nothing heavy (no torch):
every snakemake call pays for what is imported here."""
from __future__ import annotations

import json
from pathlib import Path


class StudyConfigError(ValueError):
    pass


def local_model_config(path: str) -> dict | None:
    p = Path(path) / "config.json"
    return json.loads(p.read_text()) if p.is_file() else None


def structure(model: dict, source: str) -> tuple[int | None, int | None]:
    """``(n_layers, total heads)`` of a model entry, from the entry or its local config.json."""
    n_layers, heads = model.get("n_layers"), model.get("n_heads_total")
    cfg = local_model_config(source) or {}
    if "random" in model:  # smoke presets only: transformers is imported just for them
        from .models.tiny import tiny_config

        r = dict(model["random"])
        r.pop("seed", None)
        cfg = tiny_config(r.pop("family"), **r).to_dict()
    if not cfg:
        return n_layers, heads
    L = cfg.get("num_hidden_layers") or cfg.get("n_layer")
    kind = cfg.get("model_type")
    if kind in ("mamba", "falcon_mamba"):
        h = L * cfg["intermediate_size"] // model.get("adapter_options", {}).get("channel_group", 1)
    elif kind == "mamba2":
        h = L * cfg["num_heads"]
    elif kind == "zamba2":
        blocks = cfg.get("layers_block_type", [])
        h = L * cfg.get("n_mamba_heads", 0) + blocks.count("hybrid") * cfg.get("num_attention_heads", 0)
    elif kind == "llamba" or "ssm_cfg" in cfg:
        h = L * cfg["ssm_cfg"]["n_v_heads"]
    else:
        h = L * cfg.get("num_attention_heads", 0) if L else None
    return n_layers or L, heads or h


def check(config: dict, model_source) -> dict[str, tuple[int | None, int | None]]:
    """Cross-references and sizes; returns ``{model: (n_layers, total heads)}``."""
    models = config["models"]
    shapes = {m: structure(models[m], model_source(m)) for m in models}

    def known(where: str, names):
        for name in names:
            if name not in models:
                raise StudyConfigError(f"config error: {where} names {name!r}, which is not in models "
                                       f"({', '.join(sorted(models))})")

    known("scan.models", config["scan"]["models"])
    for exp, ecfg in (config.get("experiments") or {}).items():
        known(f"experiments.{exp}.models", ecfg["models"])
        if exp == "memory":
            continue
        needs_scan = exp in ("head_keeping", "kv_pairs", "topk_removal", "arc_chat", "heatmaps")
        if needs_scan:
            missing = [m for m in ecfg["models"] if m not in config["scan"]["models"]]
            if missing:
                raise StudyConfigError(f"config error: experiments.{exp} needs the head ranking of {missing}: "
                                       f"add them to scan.models")
        known(f"experiments.{exp}.k_by_model", ecfg.get("k_by_model", {}))
        for m in ecfg["models"]:
            for k in ecfg.get("k_by_model", {}).get(m, ecfg.get("k", [])):
                heads = shapes[m][1]
                if heads is not None and k > heads:
                    raise StudyConfigError(f"config error: experiments.{exp}.k = {k} but model {m!r} has only "
                                           f"{heads} heads")
    for m in (config.get("experiments") or {}).get("layer_pruning", {}).get("models", []):
        if shapes[m][0] is None:
            raise StudyConfigError(f"config error: layer pruning of {m!r} needs models.{m}.n_layers "
                                   f"(no local config.json to read it from)")
    tasks = config["tasks"]
    if tasks.get("micro_data") is not None and not Path(tasks["micro_data"]).is_dir():
        raise StudyConfigError(f"config error: tasks.micro_data {tasks['micro_data']!r} is not a directory")
    for exp, roles in (("topk_removal", ("retrieval",)), ("arc_chat", ("arc_regular", "arc_chat"))):
        if exp in (config.get("experiments") or {}):
            for role in roles:
                if not tasks.get(role):
                    raise StudyConfigError(f"config error: experiments.{exp} needs tasks.{role}")
    return shapes
