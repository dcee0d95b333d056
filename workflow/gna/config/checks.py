"""Checks of a study config that JSON Schema cannot express, run when Snakemake parses the
workflow, so a bad value is refused before any job starts. Imports nothing heavy (no torch):
every snakemake call pays for what is imported here."""
from __future__ import annotations

import json
from pathlib import Path


from ..errors import ConfigError, StudyConfigError  # stdlib only
from ..hybrid.study.settings import check_hybrid
from .schema import experiment_needs


def local_model_config(path: str, key: str | None = None) -> dict | None:
    """A local model's config.json as a dict, None where ``path`` is no directory (a hub id); a
    directory without a config.json or with one that is not JSON is an error naming ``key``."""
    d = Path(path)
    if not d.is_dir():
        return None
    p, where = d / "config.json", f"config error: {key}: " if key else ""
    if not p.is_file():
        raise StudyConfigError(f"{where}model directory {path} has no config.json")
    try:
        cfg = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise StudyConfigError(f"{where}{p} is not JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise StudyConfigError(f"{where}{p} is not a JSON object")
    return cfg


def check_model_path(name: str, model: dict, source: str) -> None:
    """A local model that is not there, or is a file: say so (not "needs n_layers"), naming the key."""
    from ..models.spec import file_not_directory, names_a_directory

    if "random" not in model and "gguf" not in model and (problem := file_not_directory(source)):
        raise StudyConfigError(f"config error: models.{name}.path = {model.get('path')!r}: {problem}")
    if "random" in model or "gguf" in model or Path(source).exists() or not names_a_directory(source):
        return
    raise StudyConfigError(f"config error: models.{name}.path = {model.get('path')!r}: {source} does not exist "
                           f"(and it is not a Hugging Face id, org/name)")


def _config_json(model: dict, source: str, key: str | None = None) -> tuple[dict, str | None]:
    """The config.json of a model entry (local, a smoke preset's tiny config, or the shipped
    architecture of its Hugging Face id) and, for the latter, its data/architectures key."""
    if "random" in model:  # smoke presets only: transformers is imported just for them
        from ..models.tiny import tiny_config

        r = dict(model["random"])
        r.pop("seed", None)
        return tiny_config(r.pop("family"), **r).to_dict(), None
    cfg = local_model_config(source, key)
    if cfg is not None:
        return cfg, None
    from .architectures import shipped_config, shipped_key

    if "gguf" in model:  # not converted yet: a pinned artifact's shipped architecture, else the header
        return gguf_config(model["gguf"], key)
    cfg = shipped_config(source)
    return (cfg, shipped_key(source)) if cfg else ({}, None)


def gguf_config(gguf: dict, key: str | None = None) -> tuple[dict, str | None]:
    """The architecture of a GGUF entry before its conversion: the shipped config.json of a pinned
    artifact (data/architectures, keyed by the model it quantizes), else ``{}`` (the header's shape
    is read by :func:`gguf_header_shape`)."""
    from ..external import artifact_named
    from .architectures import shipped_config, shipped_key

    if "artifact" in gguf:
        hub_id = artifact_named(gguf["artifact"], f"{key}.gguf.artifact" if key else "artifact").hub_id
        cfg = shipped_config(hub_id)
        if cfg:
            return cfg, shipped_key(hub_id)
    return {}, None


def gguf_header_shape(gguf: dict, key: str) -> tuple[int | None, int | None]:
    """``(layers, total heads)`` from a GGUF file's header, where the file is already here and its
    architecture is attention only (an SSM's heads are not in the header's attention keys)."""
    from ..external import gguf_file
    from ..models.gguf import GgufError, gguf_shape, read_gguf_metadata

    path = gguf_file(gguf)
    if not Path(path).is_file():
        return None, None
    try:
        meta = read_gguf_metadata(path)
        arch, layers, heads = gguf_shape(meta)
    except GgufError as e:
        raise StudyConfigError(f"config error: {key}.gguf: {e}") from None
    if any(k.startswith(f"{arch}.ssm.") for k in meta) or not layers or not heads:
        return None, None
    return layers, layers * heads


def structure(model: dict, source: str, name: str | None = None,
              read: dict | None = None) -> tuple[int | None, int | None]:
    """``(n_layers, total heads)`` of a model entry, from the entry or its config.json (local, else
    the shipped architecture config of its Hugging Face id, data/architectures: there the entry's
    values must agree with it; an error names the key). The family's adapter reads the config
    (:meth:`gna.models.adapters.base.Adapter.structure`), so the numbers are those the loaded model
    will have, and a bad ``adapter_options`` fails here, before any job. ``read``: where the
    config.json read here is kept (``read[name]``), so later checks do not read it again."""
    from ..models.adapters import FAMILIES, adapter_of_config, supported_families
    from ..models.tiny import ALL_FAMILIES

    if "family" in model and model["family"] not in FAMILIES:
        raise StudyConfigError(f"config error: models.{name}.family = {model['family']!r} is not a family an adapter "
                               f"describes; supported families: {supported_families()}")
    if "random" in model and model["random"]["family"] not in ALL_FAMILIES:
        raise StudyConfigError(f"config error: models.{name}.random.family = {model['random']['family']!r} is not a "
                               f"model the adapters can build: {', '.join(ALL_FAMILIES)}")
    n_layers, heads = model.get("n_layers"), model.get("n_heads_total")
    check_model_path(name, model, source)
    cfg, shipped = _config_json(model, source, f"models.{name}")
    if read is not None:
        read[name] = cfg
    depth = [k for k in ("num_hidden_layers", "n_layer") if cfg.get(k) == 0]
    if depth:
        raise StudyConfigError(f"config error: models.{name}: its config.json has {depth[0]} = 0 (model {source}): "
                               f"a model without layers has no heads or layers to study")
    adapter = adapter_of_config(cfg, model.get("family")) if cfg else None
    if adapter is None and "gguf" in model:
        L, h = gguf_header_shape(model["gguf"], f"models.{name}")
        for k, given, real in (("n_layers", n_layers, L), ("n_heads_total", heads, h)):
            if given is not None and real is not None and given != real:
                raise StudyConfigError(f"config error: models.{name}.{k} = {given}, but its GGUF file has {real}")
        return n_layers or L, heads or h
    if adapter is None:
        return n_layers, heads
    try:
        L, h = adapter.structure(cfg, **model.get("adapter_options", {}))
    except ConfigError as e:  # the adapter names the key inside the entry
        raise StudyConfigError(f"config error: models.{name}.{e} (model {source})") from None
    if shipped:
        what = f"its GGUF file ({next(iter(model['gguf'].values()))})" if "gguf" in model else source
        for key, given, real in (("n_layers", n_layers, L), ("n_heads_total", heads, h)):
            if given is not None and given != real:
                raise StudyConfigError(f"config error: models.{name}.{key} = {given}, but {what} has {real} "
                                       f"(its architecture: data/architectures/{shipped}/config.json)")
    return n_layers or L, heads or h


def check(config: dict, model_source) -> dict[str, tuple[int | None, int | None]]:
    """Cross-references and sizes; returns ``{model: (n_layers, total heads)}``."""
    models = config["models"]
    read: dict[str, dict] = {}  # each model's config.json, read once
    shapes = {m: structure(models[m], model_source(m), m, read) for m in models}

    def known(where: str, names):
        for name in names:
            if name not in models:
                raise StudyConfigError(f"config error: {where} names {name!r}, which is not in models "
                                       f"({', '.join(sorted(models))})")

    known("scan.models", config["scan"]["models"])
    known("scan.method_by_model", config["scan"].get("method_by_model", {}))
    for m in config["scan"].get("check_models") or []:
        method = config["scan"].get("method_by_model", {}).get(m, config["scan"]["method"])
        if m not in config["scan"]["models"] or method != "exact":
            raise StudyConfigError(f"config error: scan.check_models names {m!r}, which the study does not rank "
                                   f"exactly (scan.models and scan.method / method_by_model): no exact ranking to "
                                   f"hold the fast scan to")
    for exp, ecfg in (config.get("experiments") or {}).items():
        known(f"experiments.{exp}.models", ecfg.get("models") or [])
        if exp == "memory" or "models" not in ecfg:  # layer_swap, hybrid_distillation: check_hybrid
            continue
        if experiment_needs(exp).get("ranking"):
            missing = [m for m in ecfg["models"] if m not in config["scan"]["models"]]
            if missing:
                raise StudyConfigError(f"config error: experiments.{exp} needs the head ranking of {missing}: "
                                       f"add them to scan.models")
        known(f"experiments.{exp}.k_by_model", ecfg.get("k_by_model", {}))
        for m in ecfg["models"]:
            for k in ecfg.get("k_by_model", {}).get(m, ecfg.get("k", [])):
                heads = shapes[m][1]
                if heads is not None and k != "all" and k > heads:
                    raise StudyConfigError(f"config error: experiments.{exp}.k = {k} but model {m!r} has only "
                                           f"{heads} heads")
    for exp, ecfg in (config.get("experiments") or {}).items():
        for m in ecfg.get("models", []) if experiment_needs(exp).get("layers") else []:
            if shapes[m][0] is None:
                raise StudyConfigError(f"config error: experiments.{exp} of {m!r} needs models.{m}.n_layers "
                                       f"(one job per layer; no local config.json to read it from)")
    check_hybrid(config, shapes, known)
    check_named_heads(config, read, shapes, known)
    tasks = config["tasks"]
    if tasks.get("micro_data") is not None and not Path(tasks["micro_data"]).is_dir():
        raise StudyConfigError(f"config error: tasks.micro_data {tasks['micro_data']!r} is not a directory")
    from .task_names import unknown_task

    problem = unknown_task(tasks) or bad_task_line(tasks)  # micro: <name>.jsonl; paper scale: lm-eval's list
    if problem:
        raise StudyConfigError(f"config error: {problem}")
    # the task roles an experiment reads (top-k removal: MMLU or the retrieval tasks; a study with MMLU
    # alone, as the real-model preset, has its two formats: letter and cloze)
    for exp in config.get("experiments") or {}:
        for role in experiment_needs(exp).get("tasks", []):
            if not any(tasks.get(r) for r in role.split("|")):
                raise StudyConfigError(f"config error: experiments.{exp} needs tasks.{role.replace('|', ' or tasks.')}")
    return shapes


def _config_description(model: dict, cfg: dict):
    """The entry's mixers from its config.json ``cfg`` (no torch), or None where the family does not say."""
    from ..models.adapters import adapter_of_config

    adapter = adapter_of_config(cfg, model.get("family")) if cfg else None
    return adapter.config_description(cfg, **model.get("adapter_options", {})) if adapter else None


def check_named_heads(config: dict, read: dict[str, dict], shapes: dict, known) -> None:
    """Every head an experiment names (``experiments.<exp>.named_heads.<model>.<role>[i]``) exists in
    its model: the layer in range, the kind in that layer, the head below that mixer's count.
    ``read``: each model's config.json, as :func:`structure` read it."""
    from ..errors import HeadIndexError, LayerIndexError

    models = config["models"]
    for exp, ecfg in (config.get("experiments") or {}).items():
        named = (ecfg or {}).get("named_heads") or {}
        known(f"experiments.{exp}.named_heads", named)
        for m, roles in named.items():
            desc = _config_description(models[m], read[m])
            for role, refs in roles.items():
                for i, ref in enumerate(refs):
                    key = f"experiments.{exp}.named_heads.{m}.{role}[{i}] = {list(ref)}"
                    try:
                        if desc is not None:
                            desc.head(list(ref))
                        elif shapes[m][0] is not None and not 0 <= ref[0] < shapes[m][0]:
                            raise LayerIndexError(f"layer {ref[0]} is out of range: the model has {shapes[m][0]} "
                                                  f"layers (0..{shapes[m][0] - 1})")
                    except (HeadIndexError, LayerIndexError) as e:
                        raise StudyConfigError(f"config error: {key}: {e} (model {m!r})") from None


def bad_task_line(tasks: dict) -> str | None:
    """The first line of a micro task file that is not a JSON object, as ``key: file line N: reason``
    (lm-eval would fail on it deep inside datasets/pyarrow, naming neither), or None."""
    from .task_names import named_tasks

    if tasks.get("micro_data") is None:
        return None
    for key, name in named_tasks(tasks):
        path = Path(tasks["micro_data"]) / f"{name}.jsonl"
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as e:
                    return f"{key}: {path} line {n} is not JSON ({e})"
                if not isinstance(row, dict):
                    return f"{key}: {path} line {n} is not a JSON object"
    return None


def schema_error(config: dict, schema_path) -> StudyConfigError:
    """The config's schema violation as one line: the failing key, its value and the rule (the
    validator's own report prints the whole failing subschema, at the top level ~1,500 lines)."""
    import jsonschema
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is None:  # pragma: no cover  (snakemake's validation failed for another reason)
        return StudyConfigError("config error: the config does not validate against the schema")
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    rule = error.schema.get(error.validator) if isinstance(error.schema, dict) else None
    rule = "" if isinstance(rule, (dict, list)) and len(str(rule)) > 80 else f" {rule!r}"
    return StudyConfigError(f"config error: {key or '(the top level)'}: {error.message} (schema rule: {error.validator}{rule})")
