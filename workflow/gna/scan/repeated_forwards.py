"""The scan's batching, for any intervention on a list of items (one head, a set of heads, a path):
per batch of prompts the residual stream entering every layer an item starts at comes from one
forward; then chunks of items run from that layer on as copies of the batch (copy a: item a's
intervention), every choice read off the same forward (:func:`gna.probes.scoring.copies_choice_logprobs`).
The head scan (:mod:`gna.scan.exact`), the ablated head sets and the patched paths
(:mod:`gna.questions`) all score through this one loop.
"""
from __future__ import annotations

from contextlib import ExitStack

import torch
from torch import nn
from tqdm.auto import tqdm

from ..interventions import capture_layer_inputs, start_at_layer
from ..probes.encoded import EncodedProbe
from ..probes.scoring import (ProbeScore, accepts_logits_to_keep, copies_choice_logprobs, fp32_logits, iter_batches,
                              score)
from ..resume.store import section

# The columns of :func:`repeated_forward_scores`' totals (n_items, 4): per item, summed over the prompts.
CORRECT, ANSWER_LOGPROB, MARGIN, DISCORDANT = range(4)
"""``CORRECT``: prompts answered right; ``ANSWER_LOGPROB``: the right choice's log-prob; ``MARGIN``: its
margin over the best other (:func:`margins`); ``DISCORDANT``: prompts whose correctness differs from the
unmodified model's (a paired test's discordant prompts)."""


def item_means(total: torch.Tensor, n: int) -> dict:
    """One item's row of totals (4,) as the tables write it: the means over the ``n`` prompts of
    ``accuracy``, ``answer_logprob`` and ``margin``, and the count of ``discordant`` prompts."""
    return dict(accuracy=total[CORRECT].item() / n, answer_logprob=total[ANSWER_LOGPROB].item() / n,
                margin=total[MARGIN].item() / n, discordant=int(total[DISCORDANT].item()))


def margins(lp: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """The log-prob margin of each example: the right choice's log-prob minus the best other's.
    lp (..., E, C), answers (E,) -> (..., E)."""
    right = lp.gather(-1, answers.expand(*lp.shape[:-1])[..., None]).squeeze(-1)
    others = lp.scatter(-1, answers.expand(*lp.shape[:-1])[..., None], float("-inf"))
    return right - others.max(-1).values


class ResidualCache:
    """The unmodified model's residual stream entering each of ``layers``, per batch of prompts, kept
    across several scans of one probe (``atp+exact``'s candidates, then each pass of its guard): each
    batch's clean forward runs once, capturing every layer a later pass may start at. Deterministic
    reuse of one forward's values, so the numbers are those of recomputing it. Kept on the CPU up to
    ``max_bytes`` in all; a batch beyond that is recomputed when asked again.
    ``forwards``: the clean forwards run."""

    def __init__(self, layers, max_bytes: float = 2e9):
        self.layers, self.max_bytes = sorted(set(layers)), max_bytes
        self.kept: dict[int, dict[int, torch.Tensor]] = {}
        self.bytes, self.forwards = 0, 0

    def inputs(self, model: nn.Module, index: int, b, wanted) -> dict[int, torch.Tensor]:
        """The layer inputs ``wanted`` of batch number ``index`` (``b``, on the model's device)."""
        device = b.input_ids.device
        kept = self.kept.get(index)
        if kept is not None and all(layer in kept for layer in wanted):
            return {layer: kept[layer].to(device) for layer in wanted}
        got = capture_layer_inputs(model, sorted(set(wanted) | set(self.layers)), **b.model_inputs(model),
                                   use_cache=False)
        self.forwards += 1
        size = sum(t.numel() * t.element_size() for t in got.values())
        if self.bytes + size <= self.max_bytes:
            self.kept[index] = {layer: t.to("cpu") for layer, t in got.items()}
            self.bytes += size
        return {layer: got[layer] for layer in wanted}


def _chunks(items: list[int], per: int, group_of=None) -> list[list[int]]:
    """``items`` in consecutive chunks of at most ``per``, none spanning two groups of ``group_of``."""
    runs: list[list[int]] = []
    for i in items:
        if runs and (group_of is None or group_of(runs[-1][-1]) == group_of(i)):
            runs[-1].append(i)
        else:
            runs.append([i])
    return [run[c:c + per] for run in runs for c in range(0, len(run), per)]


def _layer_inputs(model: nn.Module, index: int, b, layers: list[int], residuals: ResidualCache | None, prepare):
    """Batch ``index``'s clean residual entering each of ``layers`` ({layer: (B, T, d)}), kept in
    ``residuals`` or from one forward, and ``prepare``'s state of it (None without)."""
    inputs = (residuals.inputs(model, index, b, layers) if residuals is not None else
              capture_layer_inputs(model, layers, **b.model_inputs(model), use_cache=False))
    return inputs, (prepare(b, inputs) if prepare else None)


def _add(totals: torch.Tensor, chunk: list[int], lp: torch.Tensor, answers: torch.Tensor,
         was_right: torch.Tensor) -> None:
    """Add a chunk's outcomes to its items' rows of ``totals`` (n_items, 4): ``lp`` (A, E, C), the choice
    log-probs of copy a (item ``chunk[a]``) on the batch's examples; ``answers``, ``was_right`` (E,)."""
    right = lp.argmax(-1).eq(answers)
    totals[chunk, CORRECT] += right.double().sum(-1)
    totals[chunk, ANSWER_LOGPROB] += lp.gather(2, answers.expand(len(chunk), -1)[..., None]).squeeze(-1).sum(-1)
    totals[chunk, MARGIN] += margins(lp, answers).sum(-1)
    totals[chunk, DISCORDANT] += right.ne(was_right).double().sum(-1)


def repeated_forward_scores(model: nn.Module, encoded: EncodedProbe, by_start: dict[int, list[int]], n_items: int,
                            intervene, prepare=None, batch_size: int = 32, max_rows: int = 256,
                            baseline: ProbeScore | None = None, group_of=None,
                            progress: bool = False, desc: str = "repeated forwards",
                            residuals: ResidualCache | None = None, record=None,
                            resume_key=None) -> tuple[torch.Tensor, dict]:
    """The scan's batching for any intervention on items (a set of heads, a path): per batch of prompts
    the residual entering every layer of ``by_start`` ({layer: the items that start there}) from one
    forward; then chunks of items, copy a of the batch for item a, through the layers from there on.

    ``intervene(stack, layer, chunk, x)`` enters the chunk's contexts on ``stack`` (``x``: the repeated
    layer input, (A*B, T, d)). ``prepare(batch, inputs)``, where given, -> a batch's state (e.g. the
    senders' writes), passed on as ``intervene(stack, layer, chunk, x, state)``.
    Returns the totals ``(n_items, 4)``, per item summed over the prompts, its columns named by
    ``CORRECT``, ``ANSWER_LOGPROB``, ``MARGIN`` and ``DISCORDANT`` (the prompts whose correctness
    differs from the unmodified model's, for a paired test of the drop; :func:`item_means` reads a
    row), and the unmodified model's means (``baseline_accuracy``, ``baseline_logprob``,
    ``baseline_margin``).
    ``group_of(item)``: a chunk never spans two groups (the head scan: one mixer's heads per chunk,
    one ``head_mask`` of one kind). ``residuals``: clean forwards kept from an earlier scan of the same
    ``encoded`` and ``batch_size`` (:class:`ResidualCache`), else each batch's runs here.
    ``record(chunk, examples, lp, answers)``, where given, sees every chunk's choice log-probs ``lp``
    (A, E, C) of the probe's ``examples`` (E,): per-prompt outcomes, for intervals over prompts.

    In a resuming job (:func:`gna.resume.store.resuming`: every Snakemake job) each chunk's log-probs
    are kept as it finishes; a stopped job's run of the same call replays them in their place, with the
    same chunks in the same order, so its totals have the same bits. ``resume_key``: what the items
    are (the head scan's heads), beside the call's own inputs, in the key of the kept chunks.

    Over 60 lines by this docstring only: the loop is one batch's chunks, run or replayed, and their sums."""
    device = next(model.parameters()).device
    base = (score(model, encoded, batch_size=batch_size) if baseline is None else baseline).logprobs
    keep = accepts_logits_to_keep(model)
    totals = torch.zeros(n_items, 4, dtype=torch.float64)
    base_right = base.argmax(-1).eq(encoded.answers)
    # a stopped job's finished chunks, replayed in their place: the same numbers in the same order
    done = section("repeated_forwards", desc, resume_key, by_start, n_items, batch_size, max_rows, encoded.prompt_ids,
                   encoded.choice_ids, encoded.answers, encoded.packed, base)
    with fp32_logits(model) as head:
        for i, b in enumerate(tqdm(list(iter_batches(encoded, batch_size)), desc=desc, unit="batch",
                                   disable=not progress)):
            b = b.to(device)
            answers = encoded.answers[b.examples.cpu()]
            was_right = base_right[b.examples.cpu()]
            # the batch's chunks, named for a resuming job: batch, start layer, chunk
            plan = [(f"{i}/{start}/{c}", start, chunk) for start in sorted(by_start)
                    for c, chunk in enumerate(_chunks(by_start[start], max(1, max_rows // b.input_ids.shape[0]),
                                                      group_of))]
            kept = {name: done.get(name) for name, _, _ in plan} if done is not None else {}
            inputs = state = None
            if residuals is not None or any(kept.get(name) is None for name, _, _ in plan):
                inputs, state = _layer_inputs(model, i, b, sorted(by_start), residuals, prepare)
            for name, start, chunk in plan:
                if kept.get(name) is not None:
                    lp = torch.from_numpy(kept[name])
                else:
                    with ExitStack() as stack:
                        x = inputs[start].repeat(len(chunk), 1, 1)
                        stack.enter_context(start_at_layer(model, start, x))
                        # the state only where prepare makes one: an intervention needing none takes none
                        intervene(stack, start, chunk, x, *(() if prepare is None else (state,)))
                        lp = copies_choice_logprobs(model, b, head, keep, len(chunk)).cpu()  # (A, E, C)
                    if done is not None:
                        done.put(name, lp.numpy())
                if record is not None:
                    record(chunk, b.examples.cpu(), lp, answers)
                _add(totals, chunk, lp, answers, was_right)
    return totals, dict(baseline_accuracy=base_right.double().mean().item(),
                        baseline_logprob=base.gather(1, encoded.answers[:, None]).mean().item(),
                        baseline_margin=margins(base, encoded.answers).mean().item())
