"""Reversible interventions: context managers built on hooks and layer swaps, never weight edits.

Compose them with ``with`` (or :class:`contextlib.ExitStack`)::

    with truncate(model, 18), ablate_heads(model, [(16, 22)]):
        logits = model(ids).logits
"""
from .head_ablation import ablate_heads, collect_head_means, head_mask, keep_heads
from .layers import (SkipLayer, capture_layer_inputs, drop_layer, replace_layers, start_at_layer, swap_layer,
                     truncate)
from .rows import head_set, last_positions, mask_head_rows, mask_last_row
from .vocabulary import INTERVENTIONS, applied, label

__all__ = ["INTERVENTIONS", "SkipLayer", "applied", "label", "ablate_heads", "capture_layer_inputs", "collect_head_means", "drop_layer", "head_mask",
           "head_set", "keep_heads", "last_positions", "mask_head_rows", "mask_last_row", "replace_layers", "start_at_layer", "swap_layer", "truncate"]
