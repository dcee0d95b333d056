"""GGUF checkpoints (llama.cpp's format) as a model source: read the header, refuse what cannot be
loaded before any weight is read, and dequantize once into an ordinary safetensors directory that
every job then loads like any checkpoint.

Dequantized weights are not the original release: a Q4 file holds 4-bit blocks with a scale (and
a minimum for Q4_1, Q4_K), so each weight differs from the bf16 release by the quantization noise;
numbers measured on the converted model are that model's, not the bf16 model's.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from ..errors import ModelLoadError

GGUF_MAGIC = b"GGUF"
# GGUF value types: struct format of each scalar; 8 = string, 9 = array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GgufError(ModelLoadError):
    """A GGUF file that is not one, is cut short, or holds an architecture that cannot be loaded."""


class _Reader:
    def __init__(self, f, path):
        self.f, self.path = f, path

    def take(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        raw = self.f.read(size)
        if len(raw) < size:
            raise GgufError(f"{self.path}: GGUF header is cut short (truncated file)")
        return struct.unpack("<" + fmt, raw)[0]

    def string(self) -> str:
        n = self.take("Q")
        raw = self.f.read(n)
        if len(raw) < n:
            raise GgufError(f"{self.path}: GGUF header is cut short (truncated file)")
        return raw.decode("utf-8", errors="replace")

    def value(self, vtype: int):
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, n = self.take("I"), self.take("Q")
            if etype in _SCALARS:  # skipped: tokenizer scores and the like are not needed here
                size = struct.calcsize("<" + _SCALARS[etype]) * n
                self.f.seek(size, os.SEEK_CUR)
            else:
                for _ in range(n):
                    self.value(etype)
            return f"<array of {n}>"
        raise GgufError(f"{self.path}: unknown GGUF value type {vtype} (a corrupt header)")


def read_gguf_metadata(path: str | os.PathLike) -> dict:
    """The header's key-value metadata (arrays as their length only), read without touching a
    weight; plus ``GGUF.version`` and ``GGUF.tensor_count``. Not a GGUF file, or cut short inside
    the header: a :class:`GgufError` in one line."""
    path = Path(path)
    if not path.is_file():
        raise GgufError(f"GGUF file {path} does not exist" if not path.exists() else f"{path} is not a file")
    with open(path, "rb") as f:
        r = _Reader(f, path)
        if f.read(4) != GGUF_MAGIC:
            raise GgufError(f"{path} is not a GGUF file (it does not begin with the GGUF magic bytes)")
        version = r.take("I")
        if version < 2:
            raise GgufError(f"{path}: GGUF version {version} is too old (transformers reads versions 2 and 3)")
        n_tensors, n_kv = r.take("Q"), r.take("Q")
        meta = {"GGUF.version": version, "GGUF.tensor_count": n_tensors}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.take("I"))
    return meta


def gguf_shape(meta: dict) -> tuple[str, int | None, int | None]:
    """``(architecture, layers, attention heads per layer)`` from the header's metadata."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise GgufError("GGUF header has no general.architecture")
    return arch, meta.get(f"{arch}.block_count"), meta.get(f"{arch}.attention.head_count")


def supported_gguf_architectures() -> list[str]:
    """The architectures transformers' GGUF reader maps to a model class (installed version)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(GGUF_SUPPORTED_ARCHITECTURES)


def check_gguf(path: str | os.PathLike) -> dict:
    """Everything that can be refused before a weight is read: not a GGUF file, a header cut
    short, an architecture transformers' GGUF reader does not load (named, from the header), a
    model type no adapter of this project describes, tensor data cut short (the tensor index
    points past the file's end). Returns the
    transformers config (a dict) the file will load as."""
    from transformers import AutoConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    meta = read_gguf_metadata(path)
    arch = gguf_shape(meta)[0]
    supported = supported_gguf_architectures()
    if arch not in supported:
        raise GgufError(f"{path}: GGUF architecture {arch!r} (general.architecture) is not one transformers' "
                        f"GGUF reader loads; it loads: {', '.join(supported)}")
    try:
        parsed = load_gguf_checkpoint(str(path), return_tensors=False)  # header and tensor index only
        config = AutoConfig.for_model(**parsed["config"]).to_dict()
    except (ValueError, IndexError, KeyError, OSError) as e:  # numpy's errors on a cut-short tensor index
        raise GgufError(f"{path}: cannot read the GGUF tensor index ({type(e).__name__}: {e}): "
                        f"a truncated or corrupt file") from None
    from .adapters import adapter_of_config
    from ..errors import UnknownArchitectureError

    if adapter_of_config(config, None) is None:
        raise UnknownArchitectureError(f"{path}: model type {config.get('model_type')!r} has no adapter in this "
                                       f"project (gna describe lists the supported families)")
    return config


def load_gguf(path: str | os.PathLike, dtype: str = "float32", checked: bool = False):
    """``(model, tokenizer)`` straight from the GGUF file (transformers dequantizes to float32,
    then the model is cast to ``dtype``): what :func:`convert_gguf` saves. ``checked``: the caller
    has run :func:`check_gguf` on it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not checked:
        check_gguf(path)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    quantized = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    # transformers marks a model read from GGUF as quantized and refuses to save it; the same class
    # built from its config (on the meta device: no second copy) takes the dequantized tensors.
    with torch.device("meta"):
        plain = type(quantized)(quantized.config)
    plain.load_state_dict(quantized.state_dict(), assign=True)
    for name, buffer in quantized.named_buffers():  # the non-persistent ones (RoPE's inv_freq) are not in a state dict
        owner, _, attr = name.rpartition(".")
        plain.get_submodule(owner)._buffers[attr] = buffer
    plain.tie_weights()
    if hasattr(plain.config, "quantization_config"):
        del plain.config.quantization_config
    return plain.to(torch_dtype).eval(), tokenizer


def convert_gguf(path: str | os.PathLike, out_dir: str | os.PathLike, dtype: str = "float32", log=print) -> Path:
    """Dequantize the GGUF file at ``path`` to ``dtype`` and save it as a safetensors checkpoint
    directory (config, weights, tokenizer, ``gguf_source.json``), atomically."""
    from importlib.metadata import version

    import transformers

    from ..io import atomic_path, sha256_file

    path = Path(path)
    check_gguf(path)  # everything that can be refused, before a weight is read or a line is logged
    meta = read_gguf_metadata(path)
    log(f"converting {path.name} ({meta.get('general.name', '?')}, {gguf_shape(meta)[0]}) to {dtype}")
    model, tokenizer = load_gguf(path, dtype, checked=True)
    with atomic_path(out_dir, directory=True) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "gguf_source.json").write_text(json.dumps({
            "gguf_file": path.name, "sha256": sha256_file(path), "size": path.stat().st_size,
            "general.name": meta.get("general.name"), "general.architecture": gguf_shape(meta)[0],
            "general.file_type": meta.get("general.file_type"), "dtype": dtype,
            "transformers": transformers.__version__, "gguf": version("gguf")}, indent=1) + "\n")
    log(f"saved {out_dir}")
    return Path(out_dir)
