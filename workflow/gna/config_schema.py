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

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


def with_defaults(config: dict) -> dict:
    """A copy of ``config`` validated against the schema, with the schema's defaults filled in, as
    the workflow's ``validate(config, schema)`` does (raises on an invalid config)."""
    from snakemake.utils import validate

    out = copy.deepcopy(config)
    validate(out, str(SCHEMA))
    return out


def defaults_of(key: str) -> dict:
    """The settings an optional top-level object of the config (``micro``) has where a config leaves it
    out: its properties' defaults, filled in as :func:`with_defaults` fills them in ``{key: {}}``."""
    import tempfile

    import yaml
    from snakemake.utils import validate

    schema = yaml.safe_load(SCHEMA.read_text())
    only = {**schema, "required": [], "properties": {key: schema["properties"][key]}}
    out = {key: {}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "schema.yaml"
        path.write_text(yaml.safe_dump(only, sort_keys=False))
        validate(out, str(path))
    return out[key]
