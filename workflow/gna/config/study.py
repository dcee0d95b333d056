"""How the Snakefile reads the study config: which file, what ``--config key=value`` changes, and
how a config error ends (one line, no Python frames). Standard library and PyYAML only: every
``snakemake`` call pays for what is imported here.

- ``config.yaml`` is the study unless ``--configfile`` names a preset, which replaces it;
  ``--config key=value`` then changes that key of the study in use (Snakemake merges it into the
  config files' values, nested mappings key by key).
- A config file with ``extends: <preset>`` is a study in a few lines: the preset, with the file's
  models and experiments in place of the preset's and the rest merged key by key
  (:func:`study_from_files`; docs/own-model.md); checked key by key against the schema, then as a
  whole, each error naming the file and the key (jsonschema is imported for such a file only).
- Snakemake reads a nested ``--config`` value with YAML's base loader, so every scalar inside it
  is a string (``nodes: '2'``): :func:`typed_overrides` gives those scalars their YAML type, as the
  same text in a config file would have.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from .checks import StudyConfigError

def _unique_key_loader():
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last one
    silently: a model defined twice would be scanned with the second entry's weights)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may be overridden key by key
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    line = first.setdefault(key, key_node.start_mark.line)
                except TypeError:  # an unhashable key: the constructor below says so
                    continue
                if line != key_node.start_mark.line:
                    raise DuplicateKey(key, key_node.start_mark.line + 1, line + 1)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


class DuplicateKey(Exception):
    def __init__(self, key, line: int, first_line: int):
        super().__init__(key, line, first_line)
        self.key, self.line, self.first_line = key, line, first_line


def check_yaml_file(path) -> None:
    """Refuse a config file that is not YAML, has a key twice in one mapping, is empty, or is not a
    mapping, naming the file and the line (Snakemake's own message names neither, and YAML keeps a
    repeated key's last value without a word)."""
    import yaml

    try:
        data = yaml.load(Path(path).read_text(), Loader=_unique_key_loader())
    except DuplicateKey as e:
        raise StudyConfigError(f"config error: {path} line {e.line}: key {e.key!r} is given twice in one mapping "
                               f"(first at line {e.first_line}); YAML would keep only the last") from None
    except OSError as e:
        raise StudyConfigError(f"config error: cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path} line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise StudyConfigError(f"config error: {where}: not valid YAML: {problem}") from None
    if data is None:
        raise StudyConfigError(f"config error: {path} is empty: a study config is a mapping of keys "
                               "(see config.yaml)")
    if not isinstance(data, dict):
        raise StudyConfigError(f"config error: {path}: the top level is a {type(data).__name__}, not a "
                               "mapping of keys (see config.yaml)")


def _typed(value):
    """A string scalar as the YAML type its text has (``'2'`` -> 2, ``'true'`` -> True); any other
    string stays a string."""
    import yaml

    if not isinstance(value, str):
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return parsed if parsed is None or isinstance(parsed, (bool, int, float)) else value


def _retyped(value, top: bool = False):
    if isinstance(value, dict):
        return {k: _retyped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_retyped(v) for v in value]
    return value if top else _typed(value)


def typed_overrides(config: dict, overrides: dict) -> None:
    """Give the scalars inside each nested ``--config`` value (``overrides``: what Snakemake parsed
    from the command line) their YAML types in ``config``, where Snakemake merged them. A top-level
    scalar keeps Snakemake's own parse (int, float, bool, else the text)."""
    def put(target, value):
        if isinstance(value, dict) and isinstance(target, dict):
            for k, v in value.items():
                if isinstance(v, (dict, list)) and k in target:
                    target[k] = put(target[k], v)
                elif k in target:
                    target[k] = _typed(v)
            return target
        return _retyped(value)

    for key, value in (overrides or {}).items():
        if isinstance(value, (dict, list)) and key in config:
            config[key] = put(config[key], value)


def exit_with_config_error(e: BaseException) -> None:
    """End the workflow's parse with the error's one line on stderr, exit status 1 (Snakemake
    would print the Python frames of the Snakefile under it)."""
    msg = " ".join(str(e).split())
    print(msg if msg.startswith("config error") else f"config error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(1)


# -- a study in a few lines: a file that extends a preset ------------------------------------------

EXTENDS = "extends"
"""The key of a user's study file that names the preset it extends (``extends: paper``)."""

OWN_KEYS = ("models", "experiments")
"""What an extending file gives whole: its models and the experiments it runs (the preset's are
dropped, not merged into: a merge could never remove an experiment or a model the preset runs)."""

MODEL_LISTS = {("scan", "models"): None, ("scan", "check_models"): [], ("scan", "method_by_model"): {},
               ("benchmarks", "mmlu", "models"): []}
"""Settings that name the preset's models, and what an extending file that leaves them out gets in
their place (``None``: every model the file defines: its models are scanned)."""

MICRO_FIGURES = "figures"
"""The micro study's figures folder, committed: an extending study never writes there."""


def preset_path(name: str, user_file, basedir) -> Path:
    """The preset an ``extends:`` value names: a preset's name (``paper``, ``real``, ``smoke``: a file
    in workflow/configs/; ``micro``: config.yaml), or a YAML file's path, relative to the user's file
    (else to the working directory)."""
    base = Path(basedir)
    named = {p.stem: p for p in sorted((base / "workflow" / "configs").glob("*.yaml"))
             if not re.search(rf"^{EXTENDS}:", p.read_text(), re.M)}   # a template that extends is no preset
    named["micro"] = base / "config.yaml"
    if isinstance(name, str) and name in named:
        return named[name]
    if isinstance(name, str) and name.endswith((".yaml", ".yml")):
        for candidate in (Path(user_file).parent / name, Path(name)):
            if candidate.is_file():
                return candidate
    raise StudyConfigError(f"config error: {user_file}: {EXTENDS}: {name!r} is neither a preset "
                           f"({', '.join(sorted(named))}) nor a YAML file there")


def merge(base: dict, over: dict) -> dict:
    """``over`` laid on ``base`` as Snakemake merges config files: mappings key by key, recursively;
    any other value (a list, a scalar) replaces the base's."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _load(path) -> dict:
    import yaml

    check_yaml_file(path)
    return yaml.safe_load(Path(path).read_text())


def extended(user_file, basedir, below: dict | None = None) -> dict:
    """The study an extending file describes: the preset it names (laid on ``below``, what earlier
    config files gave), the file laid on it, with the file's own :data:`OWN_KEYS` and the model lists
    of :data:`MODEL_LISTS` in place of the preset's; ``figures`` (default ``figures/<file's stem>``)
    and ``study`` (default the file's stem) its own. Each key of the file is checked against the
    schema first, an unknown one refused in one line naming the file and the key."""
    user = _load(user_file)
    stem = Path(user_file).stem
    preset_file = preset_path(user.pop(EXTENDS), user_file, basedir)
    preset = _load(preset_file)
    if EXTENDS in preset:
        raise StudyConfigError(f"config error: {user_file}: {EXTENDS}: {preset_file} extends another preset; "
                               f"name a preset that does not")
    check_keys(user, user_file)
    missing = [k for k in OWN_KEYS if k not in user]
    if missing:
        raise StudyConfigError(f"config error: {user_file}: no {' and no '.join(missing)}: a file that extends a "
                               f"preset names its own models and the experiments it runs")
    out = merge(below or {}, preset)
    for key in OWN_KEYS:
        out.pop(key, None)
    for path, empty in MODEL_LISTS.items():
        if _get(user, path) is None:
            _set(out, path, sorted(user["models"]) if empty is None else empty)
    out = merge(out, user)
    out["study"] = user.get("study", stem)
    out["figures"] = user.get("figures", f"{MICRO_FIGURES}/{stem}")
    if Path(out["figures"]).as_posix().rstrip("/") in (MICRO_FIGURES, "."):
        raise StudyConfigError(f"config error: {user_file}: figures: {user['figures']!r} is the micro study's "
                               f"committed folder; give this study its own ({MICRO_FIGURES}/{stem})")
    return out


def _get(d: dict, path: tuple):
    for part in path:
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _set(d: dict, path: tuple, value) -> None:
    for part in path[:-1]:
        if not isinstance(d.get(part), dict):
            return          # the preset has no such block: nothing of the preset's to replace
        d = d[part]
    d[path[-1]] = value


def check_keys(data: dict, path, schema: dict | None = None) -> None:
    """Refuse a key of ``data`` (a config file's mapping) that the schema does not know, in one line
    naming the file and the dotted key, with the nearest known key where one is near."""
    import difflib

    import yaml

    from .schema import SCHEMA

    root = schema or yaml.safe_load(SCHEMA.read_text())

    def resolve(node):
        while isinstance(node, dict) and "$ref" in node:
            node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        return node

    def walk(value, node, where):
        node = resolve(node)
        if not isinstance(value, dict) or not isinstance(node, dict):
            return
        props = node.get("properties")
        extra = node.get("additionalProperties", True)
        for key, sub in value.items():
            dotted = f"{where}.{key}" if where else str(key)
            if props and key in props:
                walk(sub, props[key], dotted)
            elif isinstance(extra, dict):
                walk(sub, extra, dotted)
            elif extra is False and props is not None:
                near = difflib.get_close_matches(str(key), list(props), n=1)
                hint = f" (did you mean {where + '.' if where else ''}{near[0]}?)" if near else \
                    f" (known here: {', '.join(props)})"
                raise StudyConfigError(f"config error: {path}: {dotted} is not a setting of the study{hint}")

    walk(data, root, "")


def study_from_files(files, basedir, overrides: dict | None = None) -> dict | None:
    """The study the ``--configfile`` files describe where one of them extends a preset (None where
    none does: Snakemake's own merge of the files stands): the files merged in order as Snakemake
    merges them, an extending file through :func:`extended`, ``overrides`` (``--config``) on top."""
    files = list(files or ())
    loaded = [(f, _load(f)) for f in files]
    if not any(EXTENDS in data for _, data in loaded):
        return None
    out: dict = {}
    for f, data in loaded:
        out = extended(f, basedir, below=out) if EXTENDS in data else merge(out, data)
    return merge(out, dict(overrides or {}))


def check_study(config: dict, files) -> None:
    """Validate a study built from an extending file against the schema, the failing key named with
    the file that set it (the last of ``files`` that has it; else the preset's)."""
    import jsonschema
    import yaml

    from .checks import schema_error
    from .schema import SCHEMA

    schema = yaml.safe_load(SCHEMA.read_text())
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is None:
        return
    key = tuple(error.absolute_path)
    where = next((f for f in reversed(list(files)) if _has(_load(f), key)), None)
    line = str(schema_error(config, SCHEMA))
    raise StudyConfigError(line.replace("config error: ", f"config error: {where}: ", 1) if where else line)


def _has(d, path) -> bool:
    for part in path:
        if isinstance(d, dict) and part in d:
            d = d[part]
        elif isinstance(d, list) and isinstance(part, int) and part < len(d):
            d = d[part]
        else:
            return False
    return True
