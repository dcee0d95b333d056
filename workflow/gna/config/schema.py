"""The study config's schema (workflow/schemas/config.schema.yaml), where its defaults live.

The workflow validates its config against the schema with ``snakemake.utils.validate``, which fills
in the schema's defaults; the rules, scripts and library then read those keys directly. A config
built by hand (a test, a notebook) goes through :func:`with_defaults` first: the same validation,
the same defaults. Defaults are filled only inside objects that exist: a default of an optional
object's property (``experiments.topk_removal.random_draws``) appears when that object is there.
"""
from __future__ import annotations

import copy
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
