"""Ablate a head only at the answer position: KV-retrieval accuracy with the scan's top heads zeroed
nowhere, everywhere (``ablate_heads``) or at each prompt's answer position only (``ablate_at_answer``).

The answer position is the one position whose next-token distribution a probe's choices are read off
(:mod:`gna.probes.scoring`, a probe of one row per example: ``EncodedProbe.one_row``): each row's last
real token, the prompt's last where the values are one token each. The scorer pads rows on the right,
so the position is found row by row, from the forward's attention mask, never at index -1 of the batch.

The ablation is ``ablate_heads``' own: a head's slice of its mixer's output-projection input, viewed
as (..., n_heads, head_dim), set to zero; here at (row, answer position) only
(:func:`gna.interventions.mask_head_rows` at the positions :func:`answer_rows` marks). A head of the
last layer writes its other positions only into their own logits, so there the two ablations score
the same; at an earlier layer the later layers read those positions too.

The vocabulary's table entry imports :func:`answer_rows` from here; this module therefore imports
nothing of :mod:`gna.interventions` (a circle), and the script enters the condition around
:func:`accuracy_rows`.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import pandas as pd
import torch
from torch import nn

from ..errors import InterventionError, ProbeError
from ..probes.encoded import EncodedProbe
from ..probes.kv import parse_probe_task, probe_task_name, read_jsonl
from ..probes.scoring import encode, score

ABLATED = ("nowhere", "everywhere", "answer")


@contextmanager
def answer_rows(model: nn.Module) -> Iterator[Callable[[int, int], torch.Tensor]]:
    """While active, ``rows(B, T) -> (B, T) bool``: True at each row's answer position in the forward
    call running now, its last real token: by the call's 2-D ``attention_mask`` (gna.probes.scoring's
    rows, padded with any id); without a mask, the last token that is not 0 (lm-eval's rows, padded
    with 0, as :func:`gna.interventions.last_positions` reads them). A 4-D mask (packed rows, whose
    branches follow the prompt) is refused."""
    current: list = [None, None]   # (attention_mask, input_ids) of the forward call running now

    def capture(module, args, kwargs):
        current[:] = [kwargs.get("attention_mask"), kwargs.get("input_ids", args[0] if args else None)]

    def rows(B: int, T: int) -> torch.Tensor:
        mask, ids = current
        if mask is not None and mask.ndim == 2:
            real = mask[:, -T:].bool()                                 # (B, T): the current input's tokens
        elif mask is None and ids is not None and ids.shape[1] == T:
            real = ids != 0
        else:
            raise InterventionError("ablate_at_answer finds each row's answer position in the forward's 2-D "
                                    "attention_mask or, without one, its input_ids; this call has neither")
        if real.shape[0] != B:
            raise InterventionError(f"ablate_at_answer: the forward has {real.shape[0]} rows, the heads {B}")
        index = torch.arange(T, device=real.device)
        last = torch.where(real, index, torch.zeros_like(index)).amax(dim=1)   # (B,) each row's last real token
        return index[None, :] == last[:, None]

    handle = model.register_forward_pre_hook(capture, with_kwargs=True)
    try:
        yield rows
    finally:
        handle.remove()


def interventions(heads: list[list], ablated: str) -> list[dict]:
    """The condition ``ablated`` names, as the vocabulary's plain data."""
    if ablated not in ABLATED:
        raise ValueError(f"ablated={ablated!r} is not one of {ABLATED}")
    return {"nowhere": [], "everywhere": [{"ablate_heads": heads}], "answer": [{"ablate_at_answer": heads}]}[ablated]


def heads_label(heads: list[list]) -> str:
    return " ".join(f"L{h[0]}H{h[1]}" for h in heads) or "none"


def probe_sets(probes: list[list[int]], paths: list[str], tokenizer) -> dict[str, EncodedProbe]:
    """Task name (``kv_n<pairs>_s<seed>``) -> the probe file of each ``(n_pairs, seed)`` of ``probes``,
    encoded by the model's tokenizer. Refused: a probe whose choices are read off several positions."""
    out = {}
    for (n_pairs, seed), path in zip(probes, paths, strict=True):
        name = probe_task_name(n_pairs, seed)
        out[name] = encode(read_jsonl(path), tokenizer, name=name)
        if not out[name].one_row:
            raise ProbeError(f"{name}: this tokenizer splits the values so that they are read off several "
                             "positions; the answer position is one")
    return out


def accuracy_rows(model: nn.Module, probes: dict[str, EncodedProbe], columns: dict, batch_size: int = 32
                  ) -> pd.DataFrame:
    """One row per probe set of ``model`` as it is now (the caller enters the condition): ``columns``
    (the job's: model, condition, heads), then task, n_pairs, probe_seed, accuracy, n (prompts scored)."""
    rows = []
    for task, probe in probes.items():
        n_pairs, seed = parse_probe_task(task)
        accuracy = score(model, probe, batch_size=batch_size, name=task).accuracy
        rows.append({**columns, "task": task, "n_pairs": n_pairs, "probe_seed": seed, "accuracy": accuracy,
                     "n": len(probe)})
    return pd.DataFrame(rows)
