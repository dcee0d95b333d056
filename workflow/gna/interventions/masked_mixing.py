"""Masked token mixing: run chosen mixers with a per-sample, per-head mask on their matrices.

``masked_mixers(model, {(layer, kind): mask})`` multiplies each named mixer's token-mixing
matrix ``(batch, n_heads, T, T)`` by ``mask`` (same shape; batch 1 broadcasts) before it is
applied, so sample ``b``'s head ``h`` mixes with ``matrix[b, h] * mask[b, h]``:

- attention: the *softmax weights* are multiplied, with **no renormalisation** (a row whose
  mask is zero outputs zero; an all-ones mask is the model itself). The attention module's
  forward is kept; only its attention function is replaced, for that module alone, by eager
  math plus the mask (Llama, Qwen2 with GQA, Zamba2's shared block per invocation, the
  :mod:`gna.hybrid` student; any module that dispatches through transformers'
  ``AttentionInterface``). Other attention modules keep their own implementation.
- Mamba-2 (transformers' Mamba2 and Zamba2 mixers): a forward hook replaces the output by
  ``out_proj(norm(masked_matrix @ x, gate))`` from :func:`gna.patterns.mixing.mamba2_terms`; the mask
  acts on the SSD matrix including its D diagonal, before the gated norm, whose statistics are
  those of the unmasked output (its groups span several heads: masking one head must not
  rescale the others).
- discrete Mamba-2 (Llamba, hybrid student): the mixer's own ``mixing_mask`` argument.

Heads that should run unchanged get all-ones rows. Everything is undone on exit (hooks removed,
the module's config attribute put back): weights are never touched. Full-sequence forwards only
(``use_cache=False``): a mask describes a whole (T, T) matrix, not one decoding step.

The G&A masks of the MMLU-format experiment are built by :mod:`gna.patterns.ga_masks`.
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from typing import Iterator, Mapping

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface
from transformers.models.llama.modeling_llama import eager_attention_forward as _llama_eager

from ..errors import InterventionError
from ..patterns.mixing import _is_hf_mamba2, mamba2_apply, mamba2_terms
from ..models import adapter_for
from ..models.description import Mixer
from .hooks import during_invocation

MASKED_ATTENTION = "gna_masked"
_ACTIVE: dict[nn.Module, "_AttentionState"] = {}  # attention modules currently masked


# --------------------------------------------------------------------------------- attention

class _AttentionState:
    """Which mask applies to one attention module now, and what it ran before."""

    def __init__(self, module: nn.Module, config):
        self.config = config                       # the module's own config, put back on exit
        self.fallback = ALL_ATTENTION_FUNCTIONS.get_interface(
            config._attn_implementation, getattr(sys.modules[type(module).__module__], "eager_attention_forward",
                                                 _llama_eager))
        self.current = None  # returns the mask of the invocation running now (None: not masked now)


class _ConfigView:
    """The module's config, except that it names the masked attention function.

    Set on one module only: the model's (shared) config, and so every other module and the
    causal-mask construction, is unchanged.
    """

    _attn_implementation = MASKED_ATTENTION

    def __init__(self, base):
        object.__setattr__(self, "_base", base)

    def __getattr__(self, name):
        return getattr(self._base, name)


def _additive(attention_mask, query, key) -> torch.Tensor:
    """Any mask transformers passes (None = causal, bool = keep, float = additive) as additive float."""
    Tq, Tk = query.shape[2], key.shape[2]
    if attention_mask is None:  # sdpa semantics: causal when several queries, no mask otherwise
        if Tq == 1:
            return torch.zeros(1, 1, Tq, Tk, dtype=query.dtype, device=query.device)
        keep = torch.ones(Tq, Tk, dtype=torch.bool, device=query.device).tril(Tk - Tq)
        attention_mask = keep[None, None]
    if attention_mask.dtype == torch.bool:
        return torch.zeros((), dtype=query.dtype, device=query.device).masked_fill(
            ~attention_mask, torch.finfo(query.dtype).min)
    return attention_mask[:, :, :, :Tk]


def _masked_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Eager attention whose softmax weights are multiplied by the module's current mask.

    query: (B, H, Tq, d); key, value: (B, H_kv, Tk, d), head h reads K/V h // (H / H_kv).
    """
    state = _ACTIVE.get(module)
    mask = None if state is None or state.current is None else state.current()
    if mask is None:  # not masked now (another invocation of a shared block): run as before
        fallback = _llama_eager if state is None else state.fallback
        return fallback(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                              **kwargs)
    unsupported = [k for k in ("sliding_window", "softcap", "s_aux") if kwargs.get(k) is not None]
    if unsupported:  # eager math below implements plain causal softmax attention only
        raise InterventionError(f"masked attention does not implement {unsupported} ({type(module).__name__})")
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling + _additive(attention_mask, query, key)
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    _check_shape(mask, weights.shape, "attention")
    weights = weights * mask.to(weights)  # no renormalisation: masked mass is dropped
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


AttentionInterface.register(MASKED_ATTENTION, _masked_attention)


def _check_shape(mask: torch.Tensor, shape, what: str) -> None:
    B, H, Tq, Tk = shape
    if mask.ndim != 4 or mask.shape[0] not in (1, B) or tuple(mask.shape[1:]) != (H, Tq, Tk):
        raise InterventionError(f"{what} mask of shape {tuple(mask.shape)} does not fit the mixing matrix "
                                f"{tuple(shape)}: expected (batch or 1, {H}, {Tq}, {Tk})")


# attention implementations whose mask reaching the attention function is the (B, 1, Tq, Tk) one
# _additive reads; flash attention gets a 2-D padding mask (or none), flex attention a BlockMask
_FULL_MASK_IMPLEMENTATIONS = (None, "eager", "sdpa", MASKED_ATTENTION)


@contextmanager
def _mask_attention(mixer: Mixer, get_mask) -> Iterator[None]:
    module = mixer.module
    if not hasattr(module, "config"):
        raise InterventionError(f"layer {mixer.layer}'s attention module {type(module).__name__} has no config: "
                                "cannot route it through the masked attention function")
    impl = getattr(module.config, "_attn_implementation", None)
    if impl not in _FULL_MASK_IMPLEMENTATIONS:
        raise InterventionError(f"masked mixing of layer {mixer.layer}'s attention needs the (batch, 1, T, T) "
                                f"attention mask that eager or sdpa attention builds; the model runs "
                                f"attn_implementation={impl!r}: load it with attn_implementation 'sdpa' or 'eager'")
    first = module not in _ACTIVE
    if first:
        _ACTIVE[module] = _AttentionState(module, module.config)
        module.config = _ConfigView(module.config)
    elif mixer.invocation is None:
        raise InterventionError(f"layer {mixer.layer}'s attention is already masked")
    state = _ACTIVE[module]
    if mixer.invocation is None:
        state.current = get_mask
    try:  # a shared block (Zamba2): the mask applies while this invocation runs
        with during_invocation(mixer.invocation, lambda: setattr(state, "current", get_mask),
                               lambda: setattr(state, "current", None)):
            yield
    finally:
        if first:
            module.config = state.config
            del _ACTIVE[module]


# --------------------------------------------------------------------------------- SSMs

@contextmanager
def _mask_mamba2(mixer: Mixer, get_mask) -> Iterator[None]:
    def hook(module, args, kwargs, output):
        hidden = args[0] if args else kwargs["hidden_states"]
        x, matrix, gate = mamba2_terms(module, hidden, kwargs.get("attention_mask"))
        mask = get_mask()
        _check_shape(mask, matrix.shape, "mamba2")
        # the gated norm's statistics come from the unmasked output: the mask stays local to its heads
        return mamba2_apply(module, x, matrix * mask.to(matrix), gate, stats_matrix=matrix).to(output.dtype)

    handle = mixer.module.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def _mask_discrete(mixer: Mixer, get_mask) -> Iterator[None]:
    def pre_hook(module, args, kwargs):
        mask = get_mask()
        hidden = args[0] if args else kwargs["hidden_states"]
        B, T = hidden.shape[:2]
        _check_shape(mask, (B, module.n_heads, T, T), "discrete-mamba2")
        given = kwargs.get("mixing_mask")
        return args, {**kwargs, "mixing_mask": mask if given is None else mask * given}

    handle = mixer.module.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class MaskHandle:
    """Returned by :func:`masked_mixers`; :meth:`update` swaps in the next batch's masks."""

    def __init__(self, masks: dict):
        self.masks = masks

    def update(self, masks: Mapping) -> None:
        for key, mask in masks.items():
            if key not in self.masks:
                raise InterventionError(f"mask key {key!r} was not given when the context was entered; "
                                        f"known: {sorted(self.masks, key=str)}")
            self.masks[key] = mask


def _resolve(model: nn.Module, key) -> Mixer:
    desc = adapter_for(model).describe()
    layer, kind = (key, None) if isinstance(key, int) else tuple(key)
    return desc.mixer(layer, kind)


@contextmanager
def masked_mixers(model: nn.Module, masks: Mapping) -> Iterator[MaskHandle]:
    """Run each mixer ``(layer, kind)`` (or ``layer`` where it has one mixer) with its mask.

    ``masks[key]``: ``(batch or 1, n_heads, T, T)``, multiplied onto the mixer's token-mixing
    matrix (see the module docstring for what that is per kind). Yields a :class:`MaskHandle`.
    """
    mixers = {}
    for key, mask in masks.items():
        mixer = _resolve(model, key)
        if not isinstance(mask, torch.Tensor) or mask.ndim != 4 or mask.shape[1] != mixer.n_heads:
            shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise InterventionError(f"mask for layer {mixer.layer} ({mixer.kind}) must be "
                                    f"(batch, {mixer.n_heads}, T, T); got {shape}")
        mixers[key] = mixer
    handle = MaskHandle(dict(masks))
    with ExitStack() as stack:
        for key, mixer in mixers.items():
            get = (lambda key=key: handle.masks[key])
            if mixer.kind == "attention":
                stack.enter_context(_mask_attention(mixer, get))
            elif mixer.kind == "mamba2" and _is_hf_mamba2(mixer.module):
                stack.enter_context(_mask_mamba2(mixer, get))
            elif mixer.kind == "discrete-mamba2":
                stack.enter_context(_mask_discrete(mixer, get))
            else:
                raise InterventionError(f"cannot mask a {mixer.kind} mixer (layer {mixer.layer}); supported: "
                                        "attention, mamba2, discrete-mamba2")
        yield handle
