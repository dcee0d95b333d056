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


def file_not_directory(source: str) -> str | None:
    """Where ``source`` is a file, the one line that says so (a GGUF file: with the command that
    converts it); None otherwise. The loader and the config checks both say it, in these words."""
    from pathlib import Path

    path = Path(source).expanduser()
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        gguf = f.read(4) == b"GGUF"
    if gguf:
        return (f"{source!r} is a GGUF file, not a model directory: convert it once with `gna convert-gguf {source} "
                f"--out DIR` (a study: models.<name>.gguf.file)")
    return f"{source!r} is a file, not a model directory (one holding config.json and the weights)"
