"""How the Snakefile reads the study config: which file, what ``--config key=value`` changes, and
how a config error ends (one line, no Python frames). Standard library and PyYAML only: every
``snakemake`` call pays for what is imported here.

- ``config.yaml`` is the study unless ``--configfile`` names a preset, which replaces it;
  ``--config key=value`` then changes that key of the study in use (Snakemake merges it into the
  config files' values, nested mappings key by key).
- Snakemake reads a nested ``--config`` value with YAML's base loader, so every scalar inside it
  is a string (``nodes: '2'``): :func:`typed_overrides` gives those scalars their YAML type, as the
  same text in a config file would have.
"""
from __future__ import annotations

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
