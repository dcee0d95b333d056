"""A probe set as token ids (:class:`EncodedProbe`): what ``gna.probes.scoring.encode`` returns
and ``gna.probes.batches`` cuts into rows. It sits below both so that neither imports the other
for it."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class EncodedProbe:
    """A probe set as token ids. N examples, C choices each (equal C within one probe)."""
    ids: list[str]                    # (N,) example ids, for messages
    prompt_ids: list[list[int]]       # (N, L_i) prompt tokens, BOS included as tokenizer(prompt) adds it
    choice_ids: list[list[list[int]]]  # (N, C, m_ic) continuation tokens of each choice
    answers: torch.Tensor             # (N,) long, index of the correct choice
    n_choices: int
    pad_id: int
    single_token: bool                # every continuation is exactly one token
    one_row: bool                     # every example: choices = shared prefix + one last token
    packed: bool = False              # one row per example, continuations as branches (gna.probes.batches)

    def __len__(self) -> int:
        return len(self.ids)
