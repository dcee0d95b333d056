"""The model shapes the estimates start from: parameters, layers, heads, hidden width and vocab, read off
a model's config.json instantiated on the meta device (no weights, no memory), and a hybrid
student's shape derived from its teacher's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    params: int
    embed_params: int
    n_layers: int
    hidden: int
    vocab: int
    intermediate: int
    dtype_bytes: int = 2
    attention: tuple = ()
    """(layer, n_heads, head_dim, kv_heads) of every attention mixer (Zamba2: per invocation)."""
    heads_by_layer: tuple = ()
    """(layer, kind, n_heads) of every mixer: what the head scan ablates."""
    ssm: tuple = ()
    """(layer, n_heads, head_dim, d_state) of every SSM mixer (Mamba-1: channels, 1, state)."""
    untied: bool = False
    """Whether the LM head has its own weights (else it is the input embedding)."""

    @property
    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes

    @property
    def n_heads_total(self) -> int:
        return sum(h for _, _, h in self.heads_by_layer)

    def flops_per_token(self, ctx: float, layers: float | None = None, logits: bool = True) -> float:
        """Forward FLOPs per token at mean context ``ctx``, through ``layers`` of the decoder layers
        (default all), with the LM head applied to it (``logits``) or not."""
        frac = 1.0 if layers is None else layers / self.n_layers
        body = self.params - self.embed_params - (self.vocab * self.hidden if self.untied else 0)
        attn = sum(2 * h * d * ctx for (_, h, d, _) in self.attention)
        return frac * (2 * body + attn) + (2 * self.hidden * self.vocab if logits else 0)

    def widest(self) -> int:
        return max([self.hidden * 2, self.intermediate] + [2 * h * d for (_, h, d, _) in self.ssm])


def _untied(model) -> bool:
    out, inp = model.get_output_embeddings(), model.get_input_embeddings()
    return out is not None and out.weight is not inp.weight


def model_info(name: str, cfg: dict, family: str | None = None, dtype: str = "bfloat16") -> ModelInfo:
    """The shape of a model from its config.json dict (instantiated on the meta device)."""
    return _model_info_cached(name, json.dumps(cfg, sort_keys=True, default=str), family, dtype)


@lru_cache(maxsize=64)
def _model_info_cached(name, cfg_json, family, dtype) -> ModelInfo:
    from ..config.architectures import meta_model
    from ..models import describe

    cfg = json.loads(cfg_json)
    model = meta_model(cfg, family)
    d = describe(model)
    params = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    c = model.config
    inter = getattr(c, "intermediate_size", None) or (getattr(c, "mlp_cfg", None) or {}).get("intermediate_size") or 0
    ssm = []
    for m in d.mixers:
        if m.kind == "attention":
            continue
        mod = m.module
        state = (getattr(mod, "d_state", None) or getattr(mod, "ssm_state_size", None)
                 or getattr(c, "state_size", None) or getattr(c, "mamba_d_state", None) or 16)
        ssm.append((m.layer, m.n_heads, m.head_dim, int(state)))
    return ModelInfo(name=name, family=d.family, params=params, embed_params=emb.numel(), n_layers=d.n_layers,
                 hidden=emb.shape[1], vocab=emb.shape[0], intermediate=int(inter),
                 dtype_bytes=4 if dtype == "float32" else 2,
                 attention=tuple((m.layer, m.n_heads, m.head_dim, m.kv_heads or m.n_heads)
                                 for m in d.mixers if m.kind == "attention"),
                 heads_by_layer=tuple((m.layer, m.kind, m.n_heads) for m in d.mixers), ssm=tuple(ssm),
                 untied=_untied(model))


def student_info(teacher: ModelInfo, k: int, state: int) -> ModelInfo:
    """The retrieval-guided hybrid student of ``teacher``: every attention mixer replaced by a
    discrete Mamba-2 mixer of the teacher's heads and head width (state ``state``), plus ``k``
    kept attention heads (their Q/K/V/O slices)."""
    d = teacher.hidden
    delta, ssm = 0, []
    for (layer, h, hd, kv) in teacher.attention:
        inner = h * hd
        attn = d * inner * 2 + 2 * d * kv * hd
        mixer = d * (2 * inner + 2 * h * state + h) + inner * d + inner + h + 4 * (inner + 2 * h * state)
        delta += mixer - attn
        ssm.append((layer, h, hd, state))
    kept = k * (4 * d * (teacher.attention[0][2] if teacher.attention else 64)) if k else 0
    return replace(teacher, name=f"{teacher.name}-student-k{k}-s{state}", family="hybrid",
                   params=teacher.params + delta + kept, attention=(), ssm=tuple(ssm),
                   heads_by_layer=tuple((layer, "discrete-mamba2", h) for (layer, h, _, _) in ssm))
