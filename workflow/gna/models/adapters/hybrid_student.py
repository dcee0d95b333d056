"""Adapter for the hybrid student (``model_type="gna_hybrid"``, :mod:`gna.models.hybrid_student`).

Each layer has its discrete Mamba-2 mixer and, where heads are kept, an attention mixer whose
heads are the kept teacher heads in ``config.attn_heads[layer]`` order (student head j = teacher
head ``attn_heads[layer][j]``); name the kind where a layer has both. Students are made by
distillation (:mod:`gna.hybrid`), never built from scratch here: no ``builds``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..description import Mixer
from .base import Adapter

if TYPE_CHECKING:
    from torch import nn


class HybridAdapter(Adapter):
    family = "hybrid"
    examples = "gna.hybrid students (Llamba + kept teacher attention heads)"
    model_types = ("gna_hybrid",)

    @classmethod
    def structure(cls, cfg: dict, **options) -> tuple[int, int]:
        cls.check_options(options)
        L = cfg["n_layer"]
        kept = sum(len(h) for h in cfg.get("attn_heads") or [])  # None: no kept heads (HybridConfig's default)
        return L, L * cfg["ssm_cfg"]["n_v_heads"] + kept

    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    def mixers(self) -> list[Mixer]:
        out = []
        for i, layer in enumerate(self.layers()):
            m, path = layer.mixer, f"backbone.layers.{i}"
            out.append(Mixer(layer=i, kind="discrete-mamba2", n_heads=m.n_heads, head_dim=m.head_dim,
                             out_proj=m.out_proj, out_proj_path=f"{path}.mixer.out_proj", module=m))
            if layer.attn is not None:
                a = layer.attn
                out.append(Mixer(layer=i, kind="attention", n_heads=a.num_heads, head_dim=a.head_dim,
                                 out_proj=a.o_proj, out_proj_path=f"{path}.attn.o_proj", module=a,
                                 kv_heads=a.num_heads))
        return out
