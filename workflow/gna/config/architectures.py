"""The architecture configs (``config.json``, no weights) of the paper's models, shipped in
``data/architectures/<key>/config.json`` so their real shapes are known offline: the config
checks count layers and heads from them, the resource plan (:mod:`gna.plan`) sizes every job
from them. ``data/architectures/README.md`` says where each number comes from.

Imports nothing heavy at module level (the config checks run at every ``snakemake`` call);
:func:`meta_model` imports torch and transformers when called.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

ARCH_DIR = Path(__file__).resolve().parents[3] / "data" / "architectures"
# transformers writes a float JSON cannot hold (Mamba-2's time_step_limit (0, inf)) as {"__float__": "Infinity"}
# and decodes it only in from_pretrained; a config built from the dict (meta_model) must get the float.
_SPECIAL_FLOATS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def _special_float(obj: dict):
    if set(obj) == {"__float__"} and obj["__float__"] in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[obj["__float__"]]
    return obj


def read_config_json(path: Path) -> dict:
    """A ``config.json`` as transformers reads it: its tagged special floats decoded."""
    return json.loads(Path(path).read_text(), object_hook=_special_float)


@lru_cache(maxsize=1)
def index() -> dict[str, str]:
    """``{Hugging Face id: key}`` of the shipped configs (``data/architectures/index.json``)."""
    path = ARCH_DIR / "index.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def shipped_key(source: str | None) -> str | None:
    """The shipped config's key for a Hugging Face id (exact, or case-insensitive), else ``None``."""
    if not source:
        return None
    ids = index()
    if source in ids:
        return ids[source]
    lower = {k.lower(): v for k, v in ids.items()}
    return lower.get(str(source).lower())


def shipped_config(source: str | None) -> dict | None:
    """The shipped ``config.json`` of a Hugging Face id, or ``None`` when none ships."""
    key = shipped_key(source)
    if key is None:
        return None
    return read_config_json(ARCH_DIR / key / "config.json")


def local_config(path: str | None) -> dict | None:
    if not path:
        return None
    p = Path(path).expanduser() / "config.json"
    return read_config_json(p) if p.is_file() else None


def config_of(source: str | None) -> dict | None:
    """A model's ``config.json``: the local directory's, else the shipped one of its hub id."""
    return local_config(source) or shipped_config(source)


def model_type_of(cfg: dict, family: str | None = None, where: str = "config.json") -> str:
    """``model_type`` of a config, inferred where it is missing: the Llamba format, a transformers
    class in ``architectures``, or the entry's ``family``; otherwise an error naming ``where``."""
    if cfg.get("model_type"):
        return cfg["model_type"]
    from ..models.adapters import ADAPTERS
    from ..models.adapters.llamba import is_llamba_config

    if family == "llamba" or is_llamba_config(cfg):
        return "llamba"
    for arch in cfg.get("architectures") or []:
        try:
            from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        except ImportError:  # pragma: no cover
            break
        found = [mt for mt, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if cls == arch]
        stem = arch.removesuffix("ForCausalLM").lower()  # several types share a class (llama, internlm3...)
        found.sort(key=lambda mt: mt.replace("_", "").replace("-", "") != stem)
        if found:
            return found[0]
    by_family = {a.family: a.model_types[0] for a in ADAPTERS if a.model_types}
    if family in by_family:
        return by_family[family]
    from ..errors import ConfigError

    raise ConfigError(f"{where} has no model_type and its family cannot be told from its fields or "
                      f"architectures {cfg.get('architectures')!r}: add model_type to it, or set the model "
                      f"entry's family ({', '.join(sorted(by_family))})")


# -- meta-device instances (no memory) ----------------------------------------------------------

def meta_model(cfg: dict, family: str | None = None):
    """The model of ``cfg`` instantiated on the meta device: real shapes, no memory, no weights.

    ``describe(meta_model(cfg))`` gives the uniform mixer description (heads, kv groups, head
    width, Zamba2's per-invocation attention mixers); parameter counts are exact.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(cfg)
    mtype = model_type_of(cfg, family)
    with torch.device("meta"):
        if mtype == "llamba":
            from ..models.llamba import LlambaConfig, LlambaForCausalLM

            return LlambaForCausalLM(LlambaConfig.from_published(cfg)).eval()
        if mtype == "gna_hybrid":
            from ..models import hybrid_student  # noqa: F401  registers the "gna_hybrid" model type
        cfg.pop("model_type", None)
        config = AutoConfig.for_model(mtype, **{k: v for k, v in cfg.items() if k not in ("architectures",)})
        return AutoModelForCausalLM.from_config(config).eval()
