"""The name transformers gives the generation cache, on every supported transformers.

Up to 5.23 a model's forward takes and its output carries the cache as ``past_key_values`` (attention)
or ``cache_params`` (Mamba-style models); from 5.24 both are ``cache`` everywhere: ``generate`` passes
``cache=`` to ``prepare_inputs_for_generation``, reads ``outputs["cache"]``, and every ``ModelOutput``
dataclass renames an old keyword to ``cache`` in its ``__init__`` (so an output class with a
``cache_params`` field cannot be built). The models of this package speak the installed name:
:data:`CACHE_NAME`. Detected from what ``generate`` looks for, not from the version number.
"""
from __future__ import annotations

import inspect

from transformers.generation.utils import ALL_CACHE_NAMES
from transformers.masking_utils import create_causal_mask

CACHE_NAME = "cache" if "cache" in ALL_CACHE_NAMES else "cache_params"
"""The keyword and output field of a Mamba-style model's generation cache in the installed transformers."""

_MASK_CACHE_ARG = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"


def pick_cache(cache=None, cache_params=None):
    """The cache given under either name (callers written for either transformers); both is an error."""
    if cache is not None and cache_params is not None:
        raise ValueError("pass the generation cache once: as cache or as cache_params, not both")
    return cache if cache is not None else cache_params


def causal_mask_without_cache(config, inputs_embeds, attention_mask, position_ids):
    """``create_causal_mask`` for a whole sequence (no generation cache), under the installed keyword."""
    return create_causal_mask(config=config, inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                              position_ids=position_ids, **{_MASK_CACHE_ARG: None})
