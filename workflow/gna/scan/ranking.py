"""What every scan method shares: the mixers a scan covers, the ranking's columns, and how heads are
ranked and when two tie (by the dtype's log-prob resolution).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..errors import HeadIndexError
from ..models import adapter_for
from ..models.description import Mixer
from ..probes.encoded import EncodedProbe

# Log-prob drops closer than this are ties: the model's own rounding carried through its layers.
# bf16 keeps 8 significant bits (2^-8 ~ 0.004 relative): micro-llama's bf16 scan moves heads' drops
# by up to 0.004 nats from its fp32 scan; fp16 keeps 11 bits. float32/64: as before, only float
# noise between batched and unbatched sums.
LOGPROB_RESOLUTION = {torch.bfloat16: 1e-2, torch.float16: 1e-3}
FP32_RESOLUTION = 1e-6

COLUMNS = ["model", "layer", "head", "kind", "accuracy", "drop", "rank", "answer_logprob", "logprob_drop",
           "baseline_accuracy", "n_examples"]
# Prompts an ablation turns from right to wrong and from wrong to right: the paired counts a noise
# test of its drop reads (gna.questions.roles), kept beside the drop; empty where no exact ablation ran.
CHANGED = ["right_to_wrong", "wrong_to_right"]


def select_mixers(model: nn.Module, kinds=None, layers=None) -> list[Mixer]:
    """The mixers a scan covers: of ``kinds`` (default all) in ``layers`` (default all); an error
    naming what the model has when none is left."""
    desc = adapter_for(model).describe()
    for layer in layers or []:
        desc.check_layer(layer)
    found = [m for m in desc.mixers if (kinds is None or m.kind in kinds) and (layers is None or m.layer in layers)]
    if not found:
        raise HeadIndexError(f"no mixers of kinds {kinds} in layers {layers}; the model has "
                             f"{sorted({m.kind for m in desc.mixers})} in {desc.n_layers} layers")
    return found


def logprob_resolution(model: nn.Module) -> float:
    """The log-prob drop below which two heads of ``model`` tie (by the dtype it computes in)."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return LOGPROB_RESOLUTION.get(dtype, FP32_RESOLUTION)


def rank_heads(rows: list[dict], baseline: torch.Tensor, encoded: EncodedProbe, model_name: str,
               resolution: float = FP32_RESOLUTION) -> pd.DataFrame:
    """Tidy table, one row per head, ranked by accuracy drop, then log-prob drop rounded to
    ``resolution`` nats; heads equal in both are ties, ordered by position (layer, kind, head)."""
    base_acc = baseline.argmax(-1).eq(encoded.answers).double().mean().item()
    base_lp = baseline.gather(1, encoded.answers[:, None]).mean().item()
    df = pd.DataFrame(rows)
    df["model"], df["baseline_accuracy"], df["n_examples"] = model_name, base_acc, len(encoded)
    df["drop"] = base_acc - df["accuracy"]
    df["logprob_drop"] = base_lp - df["answer_logprob"]
    # Rounding before sorting keeps rounding noise (the dtype's, batched vs unbatched sums) from
    # ordering ties; + 0.0 makes -0.0 and 0.0 one value.
    df["_d"], df["_l"] = tie_keys(df["drop"], df["logprob_drop"], resolution)
    df = df.sort_values(["_d", "_l", "layer", "kind", "head"], ascending=[False, False, True, True, True])
    df["rank"] = range(1, len(df) + 1)
    return df[COLUMNS].reset_index(drop=True)


def tie_keys(drop, logprob_drop, resolution: float):
    """What a ranking compares (floats or Series): the accuracy drop rounded to 1e-9, then the
    log-prob drop rounded to ``resolution`` nats (+ 0.0 makes -0.0 and 0.0 one value)."""
    return np.round(drop, 9), np.round(logprob_drop / resolution) * resolution + 0.0


def top_k(ranking: pd.DataFrame, k: int, kinds=None) -> list[tuple[int, int, str]]:
    """The ``k`` highest-ranked heads as ``(layer, head, kind)``, optionally of some kinds only."""
    df = ranking if kinds is None else ranking[ranking["kind"].isin(kinds)]
    if not isinstance(k, int) or not 0 <= k <= len(df):
        raise HeadIndexError(f"top-k: k={k!r} but the ranking has {len(df)} heads")
    df = df.sort_values("rank").head(k)
    return [(int(r.layer), int(r.head), str(r.kind)) for r in df.itertuples()]
