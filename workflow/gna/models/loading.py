"""Load a model and its tokenizer from a :class:`ModelSpec`, the same way at every scale."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import torch

from ..jobs.devices import check_device
from ..errors import GnaError, ModelLoadError, UnknownArchitectureError
from .adapters import attach_adapter
from .spec import ModelSpec, file_not_directory, names_a_directory

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


def _local_config(path: str) -> dict | None:
    cfg = Path(path) / "config.json"
    return json.loads(cfg.read_text()) if cfg.is_file() else None


def _hub_config(spec: ModelSpec) -> dict | None:
    """A hub id's config.json (from the cache when offline), else the shipped architecture config
    (data/architectures), else ``None``: enough to pick the loader before loading."""
    try:
        from huggingface_hub import hf_hub_download

        return json.loads(Path(hf_hub_download(spec.path, "config.json", revision=spec.revision)).read_text())
    except Exception:  # not cached offline, no network, gated: from_pretrained reports it below
        from ..config.architectures import shipped_config

        return shipped_config(spec.path)


def _check_source(spec: ModelSpec) -> None:
    p = Path(spec.path).expanduser()
    if problem := file_not_directory(spec.path):
        raise ModelLoadError(problem)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelLoadError(f"model directory {spec.path!r} has no config.json")
    elif names_a_directory(spec.path):
        raise ModelLoadError(f"model directory {spec.path!r} does not exist (and it is not a Hugging Face id)")


def refuse_architecture(raw: dict, where: str) -> None:
    """Refuse, from a model's ``config.json`` (``raw``) alone, a model type no adapter will describe:
    one refused by name (:mod:`gna.models.refused`, with its reason) or one this transformers does
    not know (its own message would send the user to upgrade, after minutes of nothing)."""
    from .adapters import supported_families
    from .refused import refusal_of

    mtype = raw.get("model_type")
    if not mtype or mtype in ("llamba", "gna_hybrid"):  # gna's own types (registered at load); none: inferred
        return
    arch = f"{(raw.get('architectures') or ['?'])[0]} (model_type {mtype!r})"
    if reason := refusal_of(mtype):
        raise UnknownArchitectureError(f"unsupported architecture {arch}: {reason}; supported families: "
                                       f"{supported_families()}")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if mtype not in CONFIG_MAPPING_NAMES:
        from transformers import __version__

        raise UnknownArchitectureError(f"unsupported architecture {arch} in {where}: transformers {__version__} has "
                                       f"no model type {mtype!r}, and no gna adapter describes it; supported "
                                       f"families: {supported_families()}")


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


_CONFIG_KEYS: dict[str, str] = {}


def _load_errors() -> tuple[type[BaseException], ...]:
    """What loaders raise on bad files: missing files and hub errors (OSError), a bad config.json
    (JSONDecodeError, a ValueError; KeyError, TypeError), wrong shapes (RuntimeError), truncated or
    corrupt weights (SafetensorError). Anything else is not a load problem and passes unchanged."""
    errors: tuple[type[BaseException], ...] = (OSError, ValueError, RuntimeError, KeyError, TypeError)
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover  (transformers requires safetensors)
        return errors
    return errors + (SafetensorError,)


_LOAD_ERRORS = _load_errors()


def name_config_keys(sources: dict[str, str]) -> None:
    """Remember ``{model source (path or id): config key}`` (``models.<name>``) so that a load
    error names the config entry; :func:`gna.jobs.script_job.job` sets it from the study config for the
    job's duration (replacing what was there; ``{}`` forgets)."""
    _CONFIG_KEYS.clear()
    _CONFIG_KEYS.update({os.path.normpath(src): key for src, key in sources.items()})


def _config_key(path: str) -> str | None:
    """The config key of ``path``: the same source, or a relative source it ends with (the
    workflow makes shipped paths absolute, see ``shipped_path`` in common.smk)."""
    p = os.path.normpath(path)
    for src, key in _CONFIG_KEYS.items():
        if p == src or (not os.path.isabs(src) and p.endswith(os.sep + src)):
            return key
    return None


def load_model(spec: ModelSpec | dict | str, with_tokenizer: bool = True):
    """Return ``(model, tokenizer)`` (tokenizer ``None`` if not asked for), model in eval mode.

    First, before anything is read, the device: ``device: cuda`` on a machine without CUDA is a
    :class:`~gna.errors.DeviceError` naming the key (``auto`` becomes ``cuda`` or ``cpu`` here).
    A model whose files fail to load (truncated safetensors, missing weights, a bad config.json)
    is a :class:`~gna.errors.ModelLoadError` naming its config key (``models.<name>``, when run
    by the pipeline), its path or id, and the loader's own reason.
    """
    spec = spec if isinstance(spec, ModelSpec) else ModelSpec.from_dict(spec)
    spec = replace(spec, device=check_device(spec.device))
    key = _config_key(spec.path)
    where = f"{key} ({spec.path})" if key else repr(spec.path)
    try:
        return _load_model(spec, with_tokenizer)
    except ModelLoadError as e:  # a missing directory or config.json: add the config key
        raise ModelLoadError(f"{key}: {e}" if key else str(e)) from None
    except GnaError:  # already names the problem (dtype, unsupported architecture, channel_group)
        raise
    except _LOAD_ERRORS as e:  # the loader's reason; the original stays chained for its traceback
        raise ModelLoadError(f"cannot load model {where}: {type(e).__name__}: {e}") from e


def _load_model(spec: ModelSpec, with_tokenizer: bool):
    """:func:`load_model`'s body. The adapter is chosen here (``spec.family`` or detection) so a
    model of an unsupported architecture fails now, with a message naming the supported families.
    """
    from transformers import AutoModelForCausalLM

    from . import llamba  # noqa: F401  registers the "llamba" model type with transformers

    if spec.dtype not in _DTYPES:
        raise GnaError(f"dtype {spec.dtype!r} is not one of {sorted(_DTYPES)}")
    _check_source(spec)
    kwargs = dict(dtype=_DTYPES[spec.dtype], revision=spec.revision)
    if spec.attn_implementation:
        kwargs["attn_implementation"] = spec.attn_implementation
    if torch.device(spec.device).type == "cuda":
        # Weights go from the (safetensors) files straight to the GPU: no full host copy of an 8B
        # model first. Every loader below (Llamba's too) goes through from_pretrained. The CPU
        # path is left as it was (no device_map).
        kwargs["device_map"] = spec.device
    local = _local_config(spec.path) if Path(spec.path).is_dir() else None
    # A hub id's config decides the loader too (a Llamba id goes to the Llamba loader).
    raw = local if local is not None else _hub_config(spec)
    if raw is not None and spec.family is None and not llamba.is_llamba_config(raw):  # refused before any weight
        refuse_architecture(raw, f"{spec.path}/config.json" if local is not None else spec.path)
    if raw is not None:  # before any weight is read: no silent PyTorch SSM scan on a GPU
        from .ssm_kernels import require_fused_kernels

        mtype = "llamba" if spec.family == "llamba" or llamba.is_llamba_config(raw) else raw.get("model_type")
        require_fused_kernels(mtype, spec.device, f"model {_config_key(spec.path) or spec.path}")
    if raw is not None and raw.get("model_type") == "gna_hybrid":
        from . import hybrid_student  # noqa: F401  registers the retrieval-guided hybrid students
        model = AutoModelForCausalLM.from_pretrained(spec.path, **kwargs)
    elif spec.family == "llamba" or (raw is not None and llamba.is_llamba_config(raw)):
        model = llamba.load_llamba(spec.path, **kwargs)
    elif raw is not None and not raw.get("model_type"):  # a config.json without model_type
        from transformers import AutoConfig

        from ..config.architectures import model_type_of

        mtype = model_type_of(raw, spec.family, where=f"{spec.path}/config.json")  # else a ConfigError
        fields = {k: v for k, v in raw.items() if k != "architectures"}
        model = AutoModelForCausalLM.from_pretrained(spec.path, config=AutoConfig.for_model(mtype, **fields),
                                                     **kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(spec.path, **kwargs)
    model = (model if "device_map" in kwargs else model.to(spec.device)).eval()
    attach_adapter(model, spec.family, **spec.adapter_options)
    return model, (load_tokenizer(spec) if with_tokenizer else None)
