"""The study config's schema (workflow/schemas/config.schema.yaml), where its defaults live.

The workflow validates its config against the schema with ``snakemake.utils.validate``, which fills
in the schema's defaults; the rules, scripts and library then read those keys directly. A config
built by hand (a test, a notebook) goes through :func:`with_defaults` first: the same validation,
the same defaults. Defaults are filled only inside objects that exist: a default of an optional
object's property (``experiments.topk_removal.random_draws``) appears when that object is there.
"""
from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


def with_defaults(config: dict) -> dict:
    """A copy of ``config`` validated against the schema, with the schema's defaults filled in, as
    the workflow's ``validate(config, schema)`` does (raises on an invalid config)."""
    from snakemake.utils import validate

    out = copy.deepcopy(config)
    validate(out, str(SCHEMA))
    return out


def defaults_of(path: str) -> dict:
    """The settings the object at dotted ``path`` (``micro``, ``experiments.layer_pruning``) has where a
    config leaves them out: its properties' defaults, as validation fills them into ``{}`` there (a
    default that is itself an object gets its own properties' defaults too)."""
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text())
    node = schema
    for part in path.split("."):
        node = node["properties"][part]
    return _property_defaults(node)


def _property_defaults(node: dict) -> dict:
    out = {}
    for key, sub in (node.get("properties") or {}).items():
        if "default" in sub:
            value = copy.deepcopy(sub["default"])
            out[key] = {**_property_defaults(sub), **value} if isinstance(value, dict) else value
    return out


@lru_cache(maxsize=1)
def _schema() -> dict:
    import yaml

    return yaml.safe_load(SCHEMA.read_text())


def experiment_needs(name: str) -> dict:
    """What experiment ``name`` needs of the rest of the study, as its schema says (``x-needs-*``):
    ``ranking`` (its models in scan.models), ``layers`` (its models' depth known), ``tasks`` (the
    task roles it reads, "a|b" for either)."""
    node = _schema()["properties"]["experiments"]["properties"].get(name, {})
    return {key.removeprefix("x-needs-"): value for key, value in node.items() if key.startswith("x-needs-")}


def setting(path: str) -> dict:
    """The schema of the setting at dotted ``path`` (``scan.guard_level``): its type, bounds,
    default, choices and description, for code that offers the setting outside a study config
    (the ``gna`` command's options)."""
    node = _schema()
    for part in path.split("."):
        node = node["properties"][part]
    return node


def bounds_text(path: str) -> str:
    """The schema's bounds of a number setting as one interval, ``1..100000``, ``(0, 1)``, ``0..``."""
    node = setting(path)
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if "exclusiveMinimum" in node or "exclusiveMaximum" in node:
        return (f"{'(' if 'exclusiveMinimum' in node else '['}{'' if low is None else low}, "
                f"{'' if high is None else high}{')' if 'exclusiveMaximum' in node else ']'}")
    return f"{'' if low is None else low}..{'' if high is None else high}"


def check_setting(path: str, value, name: str | None = None) -> None:
    """Refuse ``value`` outside the schema's bounds or choices of the setting at ``path`` with one
    line naming ``name`` (a command's option; default the config key), as the study config's
    validation refuses it. ``None`` passes where the schema allows null."""
    from ..errors import ConfigError

    node, name = setting(path), name or path
    types = node.get("type", [])
    if value is None and "null" in (types if isinstance(types, list) else [types]):
        return
    if "enum" in node and value not in node["enum"]:
        raise ConfigError(f"{name} {value!r} is not one of {', '.join(map(str, node['enum']))}")
    outside = (("minimum" in node and value < node["minimum"]) or ("maximum" in node and value > node["maximum"])
               or ("exclusiveMinimum" in node and value <= node["exclusiveMinimum"])
               or ("exclusiveMaximum" in node and value >= node["exclusiveMaximum"]))
    if outside:
        raise ConfigError(f"{name} {value} is outside {bounds_text(path)}")
