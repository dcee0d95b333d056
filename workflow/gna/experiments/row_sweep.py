"""Where does a model aggregate? A row-mask sweep over named position sets of the MC prompt.

The official Zamba2 experiment (section 5.3) zeroes the attention heads' row at the answer
position only (:func:`gna.interventions.mask_last_row`). A model may aggregate elsewhere: compare
each option with the question at the option's own tokens and carry the verdict to "Answer:"
through other layers (its SSMs). This sweep masks a head set's output rows at one named set of
positions of an MMLU-format prompt at a time and scores MMLU (lm-eval's ``acc``, through
:mod:`gna.probes.scoring`):

``answer``          the prompt's last token, where the answer letter is read (the official mask)
``option_values``   each option's text after its letter ("63" of "A 63", "WPA" of "A. WPA")
``option_letters``  each option's letter (and its "." / ")" where that is its own token)
``option_closers``  the newline closing each option line (the slides' "summary" token)
``question``        every prompt token before the first option line (BOS excluded)
``all_but_answer``  every prompt token but the answer position (BOS included)

plus ``none`` (nothing masked: the same code path, the baseline). A token that straddles two sets
(a merged letter and value) belongs to the letters; a whitespace-only token inside an option line
(a lone space between letter and value) to no option set. The choices' own tokens
(after the prompt) are never masked. Prompts without option lines (knowledge clozes) are refused.

The computation layer of the experiment ``row_sweep``. One concept at three layers: this module runs
the sweep, :mod:`gna.report.row_sweep` tabulates and draws it, :mod:`gna.report.findings.row_sweep`
judges it.
"""
from __future__ import annotations

import logging

import pandas as pd
import torch
from tqdm import tqdm

from ..errors import ProbeError
from ..evaluation.items import scored_rows
from ..patterns.ga_masks import prompt_offsets, segment_mmlu_prompt
from ..interventions.rows import mask_head_rows
from ..probes.scoring import encode, masked_choice_logprobs

log = logging.getLogger(__name__)

POSITION_SETS = ("answer", "option_values", "option_letters", "option_closers", "question", "all_but_answer")
CONDITIONS = ("none", *POSITION_SETS)


def position_sets(prompt: str, offsets) -> dict[str, list[int]]:
    """The named position sets of one MMLU-format ``prompt`` (its ``offset_mapping``): token indices."""
    seg = segment_mmlu_prompt(prompt, offsets)
    offsets = [tuple(map(int, o)) for o in offsets]
    line_starts = [min(offsets[t][0] for t in toks if offsets[t][1] > offsets[t][0]) for toks in seg.choices]
    letters, values = [], []
    for toks, start, closer in zip(seg.choices, line_starts, seg.summaries):
        letter_end = start + 1 + (prompt[start + 1:start + 2] in ".):")   # "A", or "A." / "A)" / "A:"
        for t in toks:
            s, e = offsets[t]
            if prompt[s:e].strip() == "":   # the closer, or a lone space between letter and value
                continue
            (letters if s < letter_end else values).append(t)
    first_option = min(min(toks) for toks in seg.choices)
    real = [i for i, (s, e) in enumerate(offsets) if e > s]
    return {"answer": [seg.final],
            "option_values": values,
            "option_letters": letters,
            "option_closers": list(seg.summaries),
            "question": [i for i in real if i < first_option],
            "all_but_answer": list(range(seg.final))}


def prompt_position_sets(examples: list[dict], tokenizer) -> list[dict[str, list[int]]]:
    """Each example's position sets, on the very tokens :func:`gna.probes.scoring.encode` makes."""
    out = []
    for ex in examples:
        try:
            out.append(position_sets(*prompt_offsets(ex, tokenizer)))
        except ProbeError as e:
            raise ProbeError(f"row sweep: example {ex.get('id')!r} is not an MMLU-format prompt ({e})") from None
    return out


@torch.no_grad()
def row_masked_logprobs(model, tokenizer, examples: list[dict], heads, condition: str, batch_size: int = 16,
                        sets: list[dict] | None = None, enc=None) -> torch.Tensor:
    """The (N, C) choice log-probs of ``examples`` with ``heads`` (:func:`gna.interventions.head_set`)
    masked at ``condition``'s positions of every prompt (``none``: nothing masked). ``sets`` and ``enc``
    (the encoded prompts): computed here unless the caller, sweeping several conditions, has them."""
    if condition not in CONDITIONS:
        raise ProbeError(f"row sweep condition {condition!r} is not one of {CONDITIONS}")
    enc = enc if enc is not None else encode(examples, tokenizer, name="row sweep")
    sets = sets or prompt_position_sets(examples, tokenizer)
    device = next(model.parameters()).device
    current: list[torch.Tensor] = []   # the (B, T) mask of the batch running now

    def positions(B: int, T: int) -> torch.Tensor:
        return current[0]

    def set_masks(batch, rows: list[int]) -> None:
        mask = torch.zeros(*batch.input_ids.shape, dtype=torch.bool)
        if condition != "none":
            for r, e in enumerate(rows):
                mask[r, sets[e][condition]] = True
        current[:] = [mask.to(device)]

    with mask_head_rows(model, heads, positions):
        return masked_choice_logprobs(model, enc, batch_size, set_masks)


def row_masked_accuracy(model, tokenizer, examples: list[dict], heads, condition: str, batch_size: int = 16,
                        sets: list[dict] | None = None, enc=None) -> float:
    """MMLU accuracy (lm-eval's ``acc``) of :func:`row_masked_logprobs`."""
    enc = enc if enc is not None else encode(examples, tokenizer, name="row sweep")
    logprobs = row_masked_logprobs(model, tokenizer, examples, heads, condition, batch_size, sets, enc)
    return (logprobs.argmax(-1) == enc.answers).double().mean().item()


def sweep_rows(model, tokenizer, tasks: dict[str, list[dict]], heads, head_label: str, batch_size: int,
               fields: dict, conditions=CONDITIONS, answers: list | None = None) -> pd.DataFrame:
    """Tidy rows (``fields`` + head_set, heads, condition, task, metric=acc, value, n) of the sweep.
    ``answers``: a list to which each condition's per-question answers are appended
    (:func:`gna.evaluation.items.scored_rows`, with ``fields``, head_set and condition: one job's
    conditions in one table, told apart by ``condition``), which the findings pair."""
    rows = []
    for task, examples in tasks.items():
        sets, enc = prompt_position_sets(examples, tokenizer), encode(examples, tokenizer, name="row sweep")
        for cond in tqdm(conditions, desc=f"row sweep {task}", leave=False):
            logprobs = row_masked_logprobs(model, tokenizer, examples, heads, cond, batch_size, sets, enc)
            acc = (logprobs.argmax(-1) == enc.answers).double().mean().item()
            if answers is not None:
                answers.append(scored_rows(task, examples, logprobs).assign(**fields, head_set=head_label,
                                                                             condition=cond))
            log.info("%s masked at %s: %s acc %.3f (%d)", head_label, cond, task, acc, len(examples))
            rows.append(dict(fields, head_set=head_label, heads=heads if isinstance(heads, str) else
                             " ".join(f"L{h[0]}H{h[1]}" for h in heads),
                             condition=cond, task=task, metric="acc", value=acc, n=len(examples)))
    return pd.DataFrame(rows)
