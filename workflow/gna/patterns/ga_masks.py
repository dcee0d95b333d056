"""The G&A masks of the MMLU-format masking experiment (paper section 5, Fig. 5): which token
pairs a Gather or an Aggregate head may still mix, built from the prompt's answer-choice segments,
as (T, T) masks for :func:`gna.interventions.masked_mixing.masked_mixers`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import torch

from ..errors import InterventionError, ProbeError

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


def prompt_offsets(example: dict, tokenizer) -> tuple[str, list]:
    """``(context, offset_mapping)`` of an MC example's prompt on the very tokens
    :func:`gna.probes.scoring.encode` makes: the stripped prompt, BOS as the tokenizer adds it
    unless the text starts with it."""
    bos = tokenizer.bos_token or tokenizer.eos_token
    ctx = example["prompt"].rstrip()
    enc = tokenizer(ctx, add_special_tokens=not (bos and ctx.startswith(bos)), return_offsets_mapping=True)
    return ctx, enc["offset_mapping"]


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
