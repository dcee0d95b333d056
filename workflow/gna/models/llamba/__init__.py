"""Llamba / discrete Mamba-2 in pure PyTorch; importing this registers ``model_type="llamba"``.

``load_llamba`` reads a directory or hub id whose ``config.json`` is in the published format
(with ``model_type`` "llamba", another one, or none).
"""
from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from . import kernels  # noqa: F401  gna.models.llamba.kernels: the optional fused CUDA kernels
from ..llamba_format import is_llamba_config  # the family's one format test, shared with its adapter
from .configuration import LlambaConfig
from .modeling import (DiscreteMamba2, LlambaCache, LlambaDecoderLayer, LlambaForCausalLM, LlambaModel, segsum,
                       ssd_scan)

AutoConfig.register("llamba", LlambaConfig, exist_ok=True)
AutoModel.register(LlambaConfig, LlambaModel, exist_ok=True)
AutoModelForCausalLM.register(LlambaConfig, LlambaForCausalLM, exist_ok=True)

# Checkpoints exported by other tools (e.g. Fast-LLM's "llamba" format) put the untied head
# under the backbone; the cartesia reference has it at the top level.
KEY_MAPPING = {r"^backbone\.lm_head\.": "lm_head."}


def _read_config(path_or_id: str, revision: str | None = None, **hub_kwargs) -> dict:
    local = Path(path_or_id).expanduser() / "config.json"
    if local.is_file():
        return json.loads(local.read_text())
    from huggingface_hub import hf_hub_download

    return json.loads(Path(hf_hub_download(path_or_id, "config.json", revision=revision, **hub_kwargs)).read_text())


def load_llamba(path_or_id, **from_pretrained_kwargs) -> LlambaForCausalLM:
    """Load a published-format Llamba checkpoint (safetensors, sharded or not, or .bin).

    ``from_pretrained_kwargs`` go to ``LlambaForCausalLM.from_pretrained`` (``dtype``,
    ``revision``, ``device_map``...); ``config`` may be given to skip reading config.json.
    """
    kw = dict(from_pretrained_kwargs)
    config = kw.pop("config", None)
    if config is None:
        hub = {k: kw[k] for k in ("cache_dir", "token", "local_files_only") if k in kw}
        raw = _read_config(str(path_or_id), kw.get("revision"), **hub)
        if not is_llamba_config(raw):
            raise ValueError(f"{path_or_id}: config.json is not in the Llamba format (needs d_model, n_layer, "
                             "vocab_size, ssm_cfg with n_v_heads/n_qk_heads, mlp_cfg)")
        config = LlambaConfig.from_published(raw)
    kw.setdefault("key_mapping", KEY_MAPPING)
    return LlambaForCausalLM.from_pretrained(path_or_id, config=config, **kw)


__all__ = ["DiscreteMamba2", "KEY_MAPPING", "LlambaCache", "LlambaConfig", "LlambaDecoderLayer", "LlambaForCausalLM",
           "LlambaModel", "is_llamba_config", "load_llamba", "segsum", "ssd_scan"]
