"""Load a model and its tokenizer from a :class:`ModelSpec`, the same way at every scale."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..errors import GnaError
from .adapters import attach_adapter
from .spec import ModelSpec

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


def _local_config(path: str) -> dict | None:
    cfg = Path(path) / "config.json"
    return json.loads(cfg.read_text()) if cfg.is_file() else None


def _check_source(spec: ModelSpec) -> None:
    p = Path(spec.path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise GnaError(f"model directory {spec.path!r} has no config.json")
    elif spec.path.startswith((".", "/", "~")) or spec.path.count("/") > 1:
        raise GnaError(f"model directory {spec.path!r} does not exist (and it is not a Hugging Face id)")


def load_tokenizer(spec: ModelSpec):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    source = spec.tokenizer or spec.path
    local = Path(source) / "tokenizer_config.json"
    generic = local.is_file() and json.loads(local.read_text()).get("tokenizer_class") in (
        "TokenizersBackend", "PreTrainedTokenizerFast")
    # AutoTokenizer maps some model types (qwen2) to their own tokenizer class even when the
    # directory holds a plain tokenizers file, such as the micro study's word-level one.
    cls = PreTrainedTokenizerFast if generic else AutoTokenizer
    tok = cls.from_pretrained(source, revision=spec.revision)
    if tok.pad_token is None:  # batching needs a pad id; which one is irrelevant under right padding
        tok.pad_token = tok.eos_token or tok.unk_token
    return tok


def load_model(spec: ModelSpec | dict | str, with_tokenizer: bool = True):
    """Return ``(model, tokenizer)`` (tokenizer ``None`` if not asked for), model in eval mode.

    The adapter is chosen here (``spec.family`` or detection) so a model of an unsupported
    architecture fails now, with a message naming the supported families.
    """
    from transformers import AutoModelForCausalLM

    from . import llamba  # noqa: F401  registers the "llamba" model type with transformers

    spec = spec if isinstance(spec, ModelSpec) else ModelSpec.from_dict(spec)
    if spec.dtype not in _DTYPES:
        raise GnaError(f"dtype {spec.dtype!r} is not one of {sorted(_DTYPES)}")
    _check_source(spec)
    kwargs = dict(dtype=_DTYPES[spec.dtype], revision=spec.revision)
    if spec.attn_implementation:
        kwargs["attn_implementation"] = spec.attn_implementation
    local = _local_config(spec.path) if Path(spec.path).is_dir() else None
    if local is not None and local.get("model_type") == "gna_hybrid":
        from .. import hybrid  # noqa: F401  registers the retrieval-guided hybrid students
        model = AutoModelForCausalLM.from_pretrained(spec.path, **kwargs)
    elif local is not None and llamba.is_llamba_config(local):
        model = llamba.load_llamba(spec.path, **kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(spec.path, **kwargs)
    model = model.to(spec.device).eval()
    attach_adapter(model, spec.family, **spec.adapter_options)
    return model, (load_tokenizer(spec) if with_tokenizer else None)
