"""What to load: a model named by a Hugging Face id or a local directory, and how."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    path: str
    """Hugging Face id (``meta-llama/Llama-3.1-8B-Instruct``) or local directory."""
    dtype: str = "float32"
    """``float32``, ``bfloat16``, ``float16`` or ``auto`` (the checkpoint's own)."""
    revision: str | None = None
    attn_implementation: str | None = None
    """``eager`` (needed for attention weights), ``sdpa``, ... ; ``None`` = transformers' default."""
    device: str = "cpu"
    tokenizer: str | None = None
    """Where the tokenizer lives when not beside the weights (Llamba uses Llama-3's)."""
    family: str | None = None
    """Force an adapter family instead of detecting it from the config."""
    adapter_options: dict[str, Any] = field(default_factory=dict)
    """E.g. ``{"channel_group": 16}``: Mamba-1 channels per head."""

    @classmethod
    def from_dict(cls, d: dict[str, Any] | str) -> "ModelSpec":
        if isinstance(d, str):
            return cls(path=d)
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            from ..errors import ConfigError
            raise ConfigError(f"unknown model spec field(s) {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**d)


def names_a_directory(source: str) -> bool:
    """Is ``source`` written as a local directory rather than a Hugging Face id (``org/name``)?
    ``.``, ``/`` or ``~`` first, or more than one ``/``. The loader and the config checks both ask
    this, so a missing directory is named as one in both places."""
    return source.startswith((".", "/", "~")) or source.count("/") > 1
