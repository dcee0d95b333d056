"""A study config's settings as command-line options (``gna scan``'s), as the schema states them: type,
default, bounds, choices and help, so that the command and the pipeline read a setting alike."""
from __future__ import annotations


SCAN_SETTINGS = (
    ("--n-examples", "kv_probe.n_examples"), ("--pairs", "scan.n_pairs"), ("--format", "kv_probe.format"),
    ("--separator", "kv_probe.separator"), ("--seed", "kv_probe.seed"),
    ("--batch-size", "scan.batch_size"), ("--max-rows", "scan.max_rows"), ("--classify-top", "scan.classify_top"),
    ("--classify-examples", "scan.classify_examples"), ("--threshold", "scan.threshold"),
    ("--method", "scan.method"), ("--candidates", "scan.candidates"), ("--guard-sample", "scan.guard_sample"),
    ("--guard-k", "scan.guard_k"), ("--guard-level", "scan.guard_level"), ("--atp-score", "scan.atp_score"),
    ("--graddrop", "scan.atp_graddrop"), ("--shared-prefix", "scan.shared_prefix"),
    ("--max-unknown-share", "scan.probe_check.max_unknown_share"),
    ("--min-over-chance", "scan.probe_check.min_over_chance"), ("--force", "scan.probe_check.force"))
"""``gna scan``'s options that are study config settings: their type, default, bounds, choices and help
come from the schema (workflow/schemas/config.schema.yaml), as the pipeline reads them."""

COMMAND_DEFAULTS = {"kv_probe.n_examples": 200, "kv_probe.format": "paper", "scan.n_pairs": 20}
"""Defaults of the settings a study config must give (the schema has none for them): the command's own."""


def dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _number_or_null(kind):
    def parse(text: str):
        return None if text.lower() in ("null", "none") else kind(text)
    parse.__name__ = kind.__name__  # argparse names the type in its "invalid ... value" message
    return parse


def setting_option(group, flag: str, key: str) -> None:
    """``flag`` as the schema describes the setting ``key``."""
    from .schema import bounds_text, setting

    node = setting(key)
    default = COMMAND_DEFAULTS.get(key, node.get("default"))
    text = (node.get("description") or "").replace("%", "%%")
    types = node.get("type", [])
    types = types if isinstance(types, list) else [types]
    if "boolean" in types:
        group.add_argument(flag, action="store_true", help=f"{text} (config: {key})")
        return
    kw = {"choices": node["enum"]} if "enum" in node else {}
    if "integer" in types or "number" in types:
        kind = int if "integer" in types else float
        kw["type"] = _number_or_null(kind) if "null" in types else kind
        text += f"; {bounds_text(key)}"
    shown = "%(default)r" if isinstance(default, str) else "%(default)s"
    group.add_argument(flag, default=default, help=f"{text} (default: {shown}; config: {key})", **kw)
