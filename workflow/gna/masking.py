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
  ``out_proj(norm(masked_matrix @ x, gate))`` from :func:`gna.mixing.mamba2_terms`; the mask
  acts on the SSD matrix including its D diagonal, before the gated norm, whose statistics are
  those of the unmasked output (its groups span several heads: masking one head must not
  rescale the others).
- discrete Mamba-2 (Llamba, hybrid student): the mixer's own ``mixing_mask`` argument.

Heads that should run unchanged get all-ones rows. Everything is undone on exit (hooks removed,
the module's config attribute put back): weights are never touched. Full-sequence forwards only
(``use_cache=False``): a mask describes a whole (T, T) matrix, not one decoding step.

The second half builds the G&A masks of the MMLU-format experiment from the prompt's segments.
"""
from __future__ import annotations

import re
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface
from transformers.models.llama.modeling_llama import eager_attention_forward as _llama_eager

from .errors import InterventionError, ProbeError
from .mixing import _is_hf_mamba2, mamba2_apply, mamba2_terms
from .models import adapter_for
from .models.description import Mixer

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


@contextmanager
def _mask_attention(mixer: Mixer, get_mask) -> Iterator[None]:
    module = mixer.module
    if not hasattr(module, "config"):
        raise InterventionError(f"layer {mixer.layer}'s attention module {type(module).__name__} has no config: "
                                "cannot route it through the masked attention function")
    first = module not in _ACTIVE
    if first:
        _ACTIVE[module] = _AttentionState(module, module.config)
        module.config = _ConfigView(module.config)
    elif mixer.invocation is None:
        raise InterventionError(f"layer {mixer.layer}'s attention is already masked")
    state = _ACTIVE[module]
    handles = []
    if mixer.invocation is None:
        state.current = get_mask
    else:  # a shared block (Zamba2): the mask applies while this invocation runs
        def enter(m, args):
            state.current = get_mask

        def leave(m, args, output):
            state.current = None

        handles = [mixer.invocation.register_forward_pre_hook(enter),
                   mixer.invocation.register_forward_hook(leave)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
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


# --------------------------------------------------------------------------------- G&A masks

@dataclass
class ChoiceSegments:
    """Token positions of an MMLU-format prompt's answer choices."""
    choices: list[list[int]]   # each choice line's tokens, its closing newline included
    summaries: list[int]       # each choice's summary token: the newline closing its line
    letters: list[str]
    final: int                 # the prompt's last token, where the answer letter is predicted


# "A 63" (micro) or "A. WPA" / "A) WPA" / "A: WPA" (paper's MMLU format)
_CHOICE = re.compile(r"^(?P<letter>[A-Z])[.):]?[ \t]+\S")


def segment_mmlu_prompt(prompt: str, offsets) -> ChoiceSegments:
    """Find the answer-choice lines: the run of lines ``A ..``, ``B ..``, ... right before ``Answer:``.

    ``offsets``: the tokenizer's ``offset_mapping`` of the prompt (tokens of a continuation after
    the prompt may follow; they are ignored). Reading upwards from the ``Answer`` line stops at
    ``A``, so a question line that happens to start with "A " is not a choice.
    """
    offsets = [tuple(map(int, o)) for o in offsets]
    lines, pos = [], 0
    for text in prompt.split("\n"):
        lines.append((pos, pos + len(text), text))
        pos += len(text) + 1
    answer = max((i for i, (_, _, t) in enumerate(lines) if t.strip().startswith("Answer")), default=None)
    if answer is None:
        raise ProbeError(f"no 'Answer' line in MMLU prompt {prompt[-80:]!r}")
    found = []
    for start, end, text in reversed(lines[:answer]):
        m = _CHOICE.match(text)
        if not m:
            break
        found.append((start, end, m["letter"]))
        if m["letter"] == "A":
            break
    found.reverse()
    letters = [f[2] for f in found]
    if not found or letters != [chr(ord("A") + i) for i in range(len(found))]:
        raise ProbeError(f"the lines before 'Answer' are not choices A, B, ...: found {letters} in {prompt!r}")

    def tokens_in(a: int, b: int) -> list[int]:
        return [i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a]

    choices, summaries = [], []
    for start, end, _ in found:
        toks = tokens_in(start, end + 1)  # the closing newline belongs to the line
        newline = tokens_in(end, end + 1)
        if not toks:
            raise ProbeError(f"choice line {prompt[start:end]!r} has no tokens in the offsets given")
        choices.append(toks)
        summaries.append(newline[-1] if newline else toks[-1])
    final = max(i for i, (s, e) in enumerate(offsets) if e > s and s < len(prompt))
    return ChoiceSegments(choices, summaries, letters, final)


def _base(T: int, keep_diagonal: bool) -> torch.Tensor:
    return torch.eye(T) if keep_diagonal else torch.zeros(T, T)


def gather_mask(seg: ChoiceSegments, T: int, keep_diagonal: bool = False) -> torch.Tensor:
    """(T, T): keep (t, s), s <= t, with t and s in the same answer-choice segment; zero elsewhere.

    The within-segment diagonal is kept (it is inside a segment). ``keep_diagonal`` also keeps
    every other position's own entry (an SSM's D skip); off by default, so the head does nothing
    outside the choices.
    """
    m = _base(T, keep_diagonal)
    for toks in seg.choices:
        idx = torch.tensor([t for t in toks if t < T])
        m[idx[:, None], idx[None, :]] = 1.0
    return m.tril()


def aggregate_mask(seg: ChoiceSegments, T: int, keep_diagonal: bool = False) -> torch.Tensor:
    """(T, T): keep only the final position's entries onto each choice's summary token.

    Every other row is zero (the head does nothing but the aggregate read), its own final entry
    included; ``keep_diagonal`` keeps every position's own entry as in :func:`gather_mask`.
    """
    m = _base(T, keep_diagonal)
    m[seg.final, [s for s in seg.summaries if s <= seg.final]] = 1.0
    return m


def full_mask(T: int) -> torch.Tensor:
    """(T, T) zeros: the head is fully masked (outputs zero everywhere)."""
    return torch.zeros(T, T)


def ga_head_masks(seg: ChoiceSegments | None, T: int, n_heads: int, roles: Mapping[int, str], mode: str,
                  keep_diagonal: bool = False) -> torch.Tensor:
    """One prompt's mask for one mixer, ``(1, n_heads, T, T)``.

    ``roles[h]`` is ``"gather"`` or ``"aggregate"`` for the masked heads (others: all ones).
    ``mode``: ``"none"`` (all ones), ``"full"`` (role heads zero), ``"pattern"`` (role heads keep
    only their G&A pattern). A prompt without answer choices (``seg=None``, e.g. a knowledge
    cloze) has no pattern to keep, so ``"pattern"`` masks its role heads fully there.
    """
    if mode not in ("none", "full", "pattern"):
        raise InterventionError(f"mode {mode!r} is not 'none', 'full' or 'pattern'")
    out = torch.ones(1, n_heads, T, T)
    for h, role in roles.items():
        if role not in ("gather", "aggregate"):
            raise InterventionError(f"head {h}: role {role!r} is not 'gather' or 'aggregate'")
        if mode == "full" or (mode == "pattern" and seg is None):
            out[0, h] = full_mask(T)
        elif mode == "pattern":
            out[0, h] = (gather_mask if role == "gather" else aggregate_mask)(seg, T, keep_diagonal)
    return out


def stack_masks(masks: list[torch.Tensor], T: int) -> torch.Tensor:
    """Per-prompt masks ``(1 or none, H, t_b, t_b)`` -> a right-padded batch ``(B, H, T, T)``.

    Padded positions get ones (they are padding, whatever they do is not read).
    """
    H = masks[0].shape[-3]
    out = torch.ones(len(masks), H, T, T)
    for b, m in enumerate(masks):
        t = m.shape[-1]
        out[b, :, :t, :t] = m.reshape(H, t, t)
    return out
