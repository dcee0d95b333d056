"""The head-ablation scan: ablate each head alone, measure KV retrieval, rank by the drop.

The paper's code reruns the whole model for every head, one forward per answer choice.
Here, per batch of prompts: the residual stream entering every layer is computed in one
forward; then per layer l all of l's single-head ablations run as one batch (copy a of the
batch has head a zeroed) through layers l..L only; every choice is read off the same forward. Same numbers
as the naive loop (:func:`naive_scan_heads`, kept as the reference), many times faster.
"""
from __future__ import annotations

from collections import defaultdict

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..interventions import ablate_heads, capture_layer_inputs, head_mask, start_at_layer
from ..models.description import Mixer
from ..probes.scoring import (EncodedProbe, ProbeScore, accepts_logits_to_keep, copies_choice_logprobs, fp32_logits,
                             iter_batches, score)
from .ranking import logprob_resolution, rank_heads, select_mixers


def _tally(rows_acc, mixer: Mixer, heads, lp: torch.Tensor, answers: torch.Tensor) -> None:
    """Accumulate correct counts and correct-answer log-probs; lp is (A, E, C) for heads (A,)."""
    correct = lp.argmax(-1).eq(answers).sum(-1)
    ans_lp = lp.gather(2, answers.expand(len(heads), -1)[..., None]).squeeze(-1).sum(-1)
    for a, h in enumerate(heads):
        acc = rows_acc[(mixer.layer, mixer.kind, h)]
        acc[0] += int(correct[a])
        acc[1] += float(ans_lp[a])


@torch.no_grad()
def scan_heads(model: nn.Module, encoded: EncodedProbe, batch_size: int = 32, max_rows: int = 256,
               kinds=None, layers=None, model_name: str = "", progress: bool = True, heads=None,
               baseline: ProbeScore | None = None) -> pd.DataFrame:
    """Accuracy on ``encoded`` with each head alone ablated, for every head of the chosen mixers.

    ``max_rows`` bounds a forward's batch (ablation copies x rows); lower it to save memory.
    ``heads``: only these ``(layer, head, kind)`` (``atp+exact``'s candidates); default all.
    ``baseline``: the unmodified model's score on ``encoded`` where the caller has it (the probe check).
    Returns the ranked tidy table (see ``COLUMNS``).
    """
    mixers = select_mixers(model, kinds, layers)
    if heads is not None:
        wanted = {(int(l), str(k), int(h)) for l, h, k in heads}
        mixers = [m for m in mixers if any((m.layer, m.kind, h) in wanted for h in range(m.n_heads))]
    device = next(model.parameters()).device
    baseline = (score(model, encoded, batch_size=batch_size) if baseline is None else baseline).logprobs
    keep = accepts_logits_to_keep(model)
    totals: dict = defaultdict(lambda: [0, 0.0])
    batches = [b.to(device) for b in iter_batches(encoded, batch_size)]
    by_layer: dict[int, list[Mixer]] = defaultdict(list)
    for m in mixers:
        by_layer[m.layer].append(m)
    with fp32_logits(model) as head:  # the head's fp32 copy made once per scan
        for b in tqdm(batches, desc="head scan", unit="batch", disable=not progress):
            answers = encoded.answers[b.examples.cpu()].to(device)
            B = b.input_ids.shape[0]
            # every scanned layer's input from one forward (one batch's residuals held, layers x (B, T, d))
            inputs = capture_layer_inputs(model, sorted(by_layer), input_ids=b.input_ids,
                                          attention_mask=b.attention_mask, use_cache=False)
            for layer in sorted(by_layer):
                hidden = inputs.pop(layer)
                for mixer in by_layer[layer]:
                    per = max(1, max_rows // B)
                    todo = [h for h in range(mixer.n_heads) if heads is None or (mixer.layer, mixer.kind, h) in wanted]
                    for start in range(0, len(todo), per):
                        chunk = todo[start:start + per]
                        A = len(chunk)
                        mask = torch.ones(A, B, mixer.n_heads, device=device)
                        mask[torch.arange(A), :, torch.tensor(chunk)] = 0
                        with start_at_layer(model, layer, hidden.repeat(A, 1, 1)), \
                                head_mask(model, layer, mask.view(A * B, -1), mixer.kind):
                            lp = copies_choice_logprobs(model, b, head, keep, A)  # (A, E, C)
                        _tally(totals, mixer, chunk, lp.cpu(), answers.cpu())
    rows = [dict(layer=l, kind=k, head=h, accuracy=c / len(encoded), answer_logprob=s / len(encoded))
            for (l, k, h), (c, s) in totals.items()]
    return rank_heads(rows, baseline, encoded, model_name, logprob_resolution(model))


@torch.no_grad()
def naive_scan_heads(model: nn.Module, encoded: EncodedProbe, kinds=None, layers=None, model_name: str = "",
                     progress: bool = False) -> pd.DataFrame:
    """The reference: like the paper's code, the whole model once per head and per answer choice."""
    mixers = select_mixers(model, kinds, layers)
    device = next(model.parameters()).device

    def logprobs() -> torch.Tensor:
        out = torch.empty(len(encoded), encoded.n_choices, dtype=torch.float64)
        with fp32_logits(model):
            for n, (prompt, conts) in enumerate(zip(encoded.prompt_ids, encoded.choice_ids)):
                for c, cont in enumerate(conts):
                    ids = torch.tensor([prompt + cont], device=device)
                    lp = model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1:-1].float().log_softmax(-1)
                    out[n, c] = lp.gather(1, torch.tensor(cont, device=device)[:, None]).sum().item()
        return out

    baseline = logprobs()
    rows = []
    heads = [(m, h) for m in mixers for h in range(m.n_heads)]
    for m, h in tqdm(heads, desc="naive scan", disable=not progress):
        with ablate_heads(model, [(m.layer, h, m.kind)]):
            lp = logprobs()
        rows.append(dict(layer=m.layer, kind=m.kind, head=h,
                         accuracy=lp.argmax(-1).eq(encoded.answers).double().mean().item(),
                         answer_logprob=lp.gather(1, encoded.answers[:, None]).mean().item()))
    return rank_heads(rows, baseline, encoded, model_name, logprob_resolution(model))
