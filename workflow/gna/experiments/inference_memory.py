"""Inference memory: KV cache plus SSM state, by the paper's formula and measured.

    M(L) = 2 (K and V) * bytes * L * sum over attention units (kv_heads * head_dim)
         + sum over SSM layers (bytes * n_heads * head_dim * state_size)      [decimal MB]

The formula counts the recurrent state only; a real cache also holds each SSM layer's
convolution window, which :func:`measure_cache_bytes` sees and the formula does not.

The computation layer of the experiment ``memory`` (its rules, tables and findings are named
inference_memory). One concept at three layers: this module computes and measures,
:mod:`gna.report.inference_memory` tabulates, :mod:`gna.report.findings.inference_memory` judges.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import torch


@dataclass(frozen=True)
class CacheConfig:
    name: str
    kv_elements: int        # sum over attention units of kv_heads * head_dim
    ssm_elements: int       # sum over SSM layers of n_heads * head_dim * state_size
    description: str
    bytes_per: int = 2      # bf16

    def megabytes(self, seq_len: int) -> float:
        return (2 * self.bytes_per * seq_len * self.kv_elements + self.bytes_per * self.ssm_elements) / 1e6


PUBLISHED_CONFIGS = (
    CacheConfig("llama-1b", 16 * 8 * 64, 0, "Llama-3.2-1B: 16 layers x 8 kv heads x 64"),
    CacheConfig("mamba-in-llama", 8 * 8 * 64, 8 * 32 * 64 * 64,
                "8 attention layers x 8 kv x 64 + 8 SSM layers (32 heads x 64, state 64)"),
    CacheConfig("hybrid-llamba", 20 * 64, 16 * 32 * 64 * 8,
                "20 attention heads x 64 (own K/V each) + 16 SSM layers (32 x 64, state 8)"),
)
SEQ_LENS = (128, 2048, 4096)


def fits(cfg: CacheConfig, published: dict[int, float], decimals: int = 1) -> bool:
    return all(round(cfg.megabytes(L) + 1e-9, decimals) == round(v, decimals) for L, v in published.items())


def search_configs(published: dict[int, float], head_dims=(64, 128), max_kv_heads: int = 256,
                   ssm_step: int = 8192, max_ssm_elements: int = 4 * 2**20) -> list[CacheConfig]:
    """Every (attention heads x head_dim, SSM state elements) whose formula reproduces
    ``published`` ({L: MB}) at its printed precision; SSM elements searched in steps of
    ``ssm_step`` (one head_dim-64 head with state 128). Used for Hybrid-Mohawk, whose
    configuration is not published."""
    found = []
    for hd, kv, s in product(head_dims, range(max_kv_heads + 1), range(0, max_ssm_elements + 1, ssm_step)):
        cfg = CacheConfig(f"{kv}x{hd}+{s}", kv * hd, s, f"{kv} attention heads x {hd} + {s} SSM state elements")
        if fits(cfg, published):
            found.append(cfg)
    return found


def _tensor_bytes(obj, seen: set) -> int:
    if isinstance(obj, torch.Tensor):
        key = (obj.data_ptr(), obj.numel())
        if key in seen or obj.numel() == 0:
            return 0
        seen.add(key)
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(o, seen) for o in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(o, seen) for o in obj.values())
    if hasattr(obj, "__dict__") and not isinstance(obj, (torch.nn.Module, type)):
        return sum(_tensor_bytes(o, seen) for o in vars(obj).values())
    return 0


@torch.no_grad()
def measure_cache_bytes(model, seq_len: int, vocab_size: int | None = None) -> int:
    """Bytes of every tensor in the model's inference cache after a prompt of ``seq_len`` tokens."""
    vocab = vocab_size or model.config.vocab_size
    ids = torch.arange(seq_len, device=next(model.parameters()).device)[None] % max(vocab - 5, 1) + 5
    out = model(input_ids=ids, use_cache=True)
    cache = next((v for k, v in out.items() if k in ("cache", "past_key_values", "cache_params")), None)
    if cache is None:
        raise ValueError(f"{type(model).__name__} returned no inference cache")
    return _tensor_bytes(cache, set())


def formula_for_model(model, bytes_per: int | None = None) -> CacheConfig:
    """The formula's terms for a loaded model, read off its mixer description."""
    from ..models import describe

    desc = describe(model)
    kv = ssm = 0
    for m in desc.mixers:
        if m.kind == "attention":
            kv += (m.kv_heads or m.n_heads) * m.head_dim
        else:
            module = m.module
            state = getattr(module, "ssm_state_size", None) or getattr(module, "d_state", None)
            ssm += m.n_heads * m.head_dim * state
    size = bytes_per or next(model.parameters()).element_size()
    return CacheConfig(desc.family, kv, ssm, f"{desc.family}: {kv} K/V elements per token, {ssm} state", size)
