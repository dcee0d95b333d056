"""Multiple-choice scoring by summed continuation log-prob, in three layers:

    encode(examples, tokenizer) -> EncodedProbe      token ids, tokenized exactly as lm-eval's HFLM
    iter_batches(encoded, batch_size) -> ProbeBatch  padded tensors + where to read the scores
    batch_choice_logprobs(logits, batch)             (E, C) summed log-probs of a batch's choices

While :func:`fp32_logits` is active, ``with head.gather(batch)`` makes the LM head project only
the positions each row's scores read (:func:`gathered_choice_logprobs` reads those logits).

``score`` chains them with the model's forward. A head-ablation scan reuses the middle layers
with its own forward (many ablations of one batch at once: logits with leading dims).

Rows, one per example or per continuation, and packed rows: :mod:`gna.probes.batches`.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ProbeError
from .batches import ProbeBatch, examples_per_batch, iter_batches  # noqa: F401 - importable from here
from .encoded import EncodedProbe
from .values import check_encoded


@dataclass
class ProbeScore:
    logprobs: torch.Tensor  # (N, C) float64 summed continuation log-probs
    answers: torch.Tensor   # (N,) long
    correct: torch.Tensor   # (N,) bool, argmax (first on ties, like lm-eval's np.argmax) == answer
    accuracy: float
    ids: list[str]


def _check(examples, name: str) -> int:
    """Validate the examples; return their common number of choices."""
    if len(examples) == 0:
        raise ProbeError(f"{name} is empty: no examples to score")
    n_choices = None
    for i, ex in enumerate(examples):
        eid = ex.get("id", f"#{i}")
        choices, answer = ex.get("choices"), ex.get("answer")
        if not choices:
            raise ProbeError(f"{name}: example {eid!r} has no choices")
        if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(choices):
            raise ProbeError(f"{name}: example {eid!r} has answer {answer!r}, not an index in 0..{len(choices) - 1}")
        n_choices = n_choices or len(choices)
        if len(choices) != n_choices:
            raise ProbeError(f"{name}: example {eid!r} has {len(choices)} choices, the first has {n_choices}; "
                             f"score sets with different choice counts separately")
    return n_choices


def encode(examples, tokenizer, name: str = "probe set", packed: bool = False) -> EncodedProbe:
    """Tokenize prompts and choices exactly as lm-eval 0.4.13's HFLM does for loglikelihood:
    trailing white space of the context moves to the continuation; the context is
    ``tokenizer.encode(context)`` (BOS as the tokenizer adds it, none if the text already starts
    with it) and the continuation is ``encode(context + continuation)[len(context ids):]``, so a
    merge across the boundary is tokenized as in the whole text. ``packed``: one row per example
    with the continuations as branches (:mod:`gna.probes.batches`; attention models only), where
    the choices do not fit one row anyway.

    A probe of the project's own (:mod:`gna.probes.values`) with a choice whose tokens are a proper
    prefix of another's is refused here, before any model runs."""
    n_choices = _check(examples, name)
    bos = tokenizer.bos_token or tokenizer.eos_token
    prompt_ids, choice_ids = [], []
    for i, ex in enumerate(examples):
        prompt = ex["prompt"]
        ctx = prompt.rstrip()
        conts = [prompt[len(ctx):] + c for c in ex["choices"]]
        special = not (bos and ctx.startswith(bos))
        enc = tokenizer([ctx] + [ctx + c for c in conts], add_special_tokens=special)["input_ids"]
        ctx_ids = list(enc[0])
        cont_ids = [list(whole[len(ctx_ids):]) for whole in enc[1:]]
        for c, ids in zip(ex["choices"], cont_ids):
            if not ids:
                raise ProbeError(f"{name}: example {ex.get('id', f'#{i}')!r}: choice {c!r} encodes to no tokens")
        prompt_ids.append(ctx_ids)
        choice_ids.append(cont_ids)
    check_encoded(examples, choice_ids, name)  # a value that is a prefix of another could never be chosen
    single = all(len(c) == 1 for cs in choice_ids for c in cs)
    one_row = all(len({tuple(c[:-1]) for c in cs}) == 1 for cs in choice_ids)  # equal prefixes, so equal lengths
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    return EncodedProbe(ids=[str(ex.get("id", f"#{i}")) for i, ex in enumerate(examples)], prompt_ids=prompt_ids,
                        choice_ids=choice_ids, answers=torch.tensor([ex["answer"] for ex in examples]),
                        n_choices=n_choices, pad_id=pad, single_token=single, one_row=one_row,
                        packed=packed and not one_row)


def batch_choice_logprobs(logits: torch.Tensor, batch: ProbeBatch) -> torch.Tensor:
    """Summed log-probs of every choice: logits (..., B, T, V) -> (..., E, C) float64.

    The sequence axis may be full (T) or only ``batch.keep_pos`` (the model ran with
    ``logits_to_keep=batch.keep_pos``). Leading dims (e.g. A ablations of the batch) are kept.
    log_softmax runs in float32 at the P positions read only, not over all (B, T, V).
    """
    B, T = batch.input_ids.shape
    lead, (b, t, V) = logits.shape[:-3], logits.shape[-3:]
    if b != B or t not in (T, len(batch.keep_pos)):
        raise ProbeError(f"logits of shape {tuple(logits.shape)} do not fit a batch of {B} rows x {T} "
                         f"positions ({len(batch.keep_pos)} kept)")
    pos = batch.score_pos if t == T else batch.score_kept  # t == U == T only if all positions are kept
    lp = logits.reshape(-1, b, t, V)[:, batch.score_rows, pos].float().log_softmax(-1)  # (A, P, V)
    vals = lp[:, batch.target_index, batch.target_token].double()                    # (A, K)
    E, C = len(batch.examples), batch.n_choices
    out = vals.new_zeros(vals.shape[0], E * C).index_add_(1, batch.target_slot, vals)
    return out.view(*lead, E, C)


def masked_choice_logprobs(model: nn.Module, encoded: EncodedProbe, batch_size: int,
                           set_masks: Callable[[ProbeBatch, list[int]], None]) -> torch.Tensor:
    """(N, C) float64 choice log-probs of ``encoded``, one full forward per batch after
    ``set_masks(batch, rows)`` has installed that batch's masks (``rows``: the example of each of
    the batch's rows, ``batch.row_example``). The masking experiments' one loop: what
    they mask differs, how a masked model is scored does not."""
    device = next(model.parameters()).device
    logprobs = torch.empty(len(encoded), encoded.n_choices, dtype=torch.float64)
    with torch.no_grad():
        for batch in iter_batches(encoded, batch_size):
            set_masks(batch, batch.examples[batch.row_example].tolist())
            b = batch.to(device)
            out = model(**b.model_inputs(model), use_cache=False)
            logprobs[batch.examples] = batch_choice_logprobs(out.logits, b).cpu()
    return logprobs


def accepts_logits_to_keep(model) -> bool:
    """transformers' own causal LMs slice hidden states by a 1-D ``logits_to_keep`` tensor, so
    only the positions read are projected onto the vocabulary (B x T x 128k logits otherwise);
    so do classes that say so (``logits_to_keep_positions``: Llamba and the hybrid students).
    Others may take only an int there: give them full logits."""
    if getattr(type(model), "logits_to_keep_positions", False):
        return True
    return type(model).__module__.startswith("transformers.") and hasattr(model, "lm_head")


class ScoredHead:
    """The LM head while :func:`fp32_logits` is active: float32 logits from float32 inputs and
    weights, computed once (the module's own low-precision product is never computed).

    Inside ``with head.gather(batch):`` the head projects only the positions the batch's scores
    read, each row at its own positions (``batch.score_rows``, ``batch.score_pos``): its input
    ``(A * B, t, d)`` for A copies of the batch's B rows becomes ``(A, P, d)`` before the
    product, so a model's ``.logits`` are ``(A, P, V)`` (read them with
    :func:`gathered_choice_logprobs`). ``logits_to_keep`` alone keeps the union of the batch's
    positions for every row (U of them): U times the logits this computes.
    """

    def __init__(self, module: nn.Linear | None, weight: torch.Tensor | None, bias: torch.Tensor | None):
        self.module, self.weight, self.bias = module, weight, bias
        self.batch: ProbeBatch | None = None

    @property
    def can_gather(self) -> bool:
        return self.module is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.batch is not None:
            x = gather_scored(x, self.batch)
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias)

    @contextmanager
    def gather(self, batch: ProbeBatch):
        """While inside, the head computes ``batch``'s scored positions only (see the class)."""
        if not self.can_gather:
            raise ProbeError("this model's LM head is not a Linear layer: its logits cannot be gathered")
        self.batch = batch
        try:
            yield
        finally:
            self.batch = None


def gather_scored(hidden: torch.Tensor, batch: ProbeBatch) -> torch.Tensor:
    """The hidden states the batch's scores read: ``(A * B, t, d) -> (A, P, d)``; ``t`` is the
    batch's length T or its kept positions (``logits_to_keep=batch.keep_pos``)."""
    B, T = batch.input_ids.shape
    R, t = hidden.shape[:2]
    if R % B or t not in (T, len(batch.keep_pos)):
        raise ProbeError(f"LM head input of shape {tuple(hidden.shape)} does not fit a batch of {B} rows x "
                         f"{T} positions ({len(batch.keep_pos)} kept)")
    pos = batch.score_pos if t == T else batch.score_kept
    return hidden.view(R // B, B, t, -1)[:, batch.score_rows, pos]


def scored_logits(model: nn.Module, b: ProbeBatch, head: ScoredHead, keep: bool, copies: int = 1,
                  **kwargs) -> torch.Tensor:
    """``model``'s logits at the scored positions of ``copies`` copies of batch ``b`` ``(A, P, V)``
    (the head gathers; ``keep``: the model also takes ``logits_to_keep``). ``kwargs`` go to the model."""
    kw = dict(**b.model_inputs(model, copies), use_cache=False, **kwargs)
    if keep:
        kw["logits_to_keep"] = b.keep_pos
    with head.gather(b):
        return model(**kw).logits


def gathered_choice_logprobs(logits: torch.Tensor, batch: ProbeBatch) -> torch.Tensor:
    """Summed log-probs of every choice from gathered logits ``(A, P, V)`` (:meth:`ScoredHead.gather`)
    -> ``(A, E, C)`` float64; log_softmax in float32."""
    if logits.dim() != 3 or logits.shape[1] != len(batch.score_rows):
        raise ProbeError(f"gathered logits of shape {tuple(logits.shape)}: expected (copies, "
                         f"{len(batch.score_rows)} scored positions, vocabulary)")
    lp = logits.float().log_softmax(-1)
    vals = lp[:, batch.target_index, batch.target_token].double()  # (A, K)
    E, C = len(batch.examples), batch.n_choices
    out = vals.new_zeros(vals.shape[0], E * C).index_add_(1, batch.target_slot, vals)
    return out.view(-1, E, C)


def copies_choice_logprobs(model: nn.Module, b: ProbeBatch, head: ScoredHead, keep: bool,
                           copies: int = 1) -> torch.Tensor:
    """Choice log-probs ``(A, E, C)`` of ``copies`` copies of batch ``b`` (an intervention inside
    tells the copies apart): the LM head at each row's scored positions where ``head`` can gather,
    else the model's logits (``logits_to_keep`` where it takes it). Every repeated-forward loop
    (the head scan, ablated head sets, patched paths) scores through here."""
    if head.can_gather:
        return gathered_choice_logprobs(scored_logits(model, b, head, keep, copies), b)
    kw = dict(**b.model_inputs(model, copies), use_cache=False)
    if keep:
        kw["logits_to_keep"] = b.keep_pos
    logits = model(**kw).logits
    return batch_choice_logprobs(logits.view(copies, b.input_ids.shape[0], *logits.shape[1:]), b)


@contextmanager
def fp32_logits(model: nn.Module) -> Iterator[ScoredHead]:
    """While inside, the model's LM head outputs float32 logits computed from float32 inputs and
    weights, and nothing else: the module's own low-precision product is replaced, not followed.
    A bf16 head rounds logits of ~10 to steps of 1/16, more than the log-prob differences a head
    ranking reads; the body's own bf16 rounding stays (that is the model's precision). The fp32
    copy of the head's weight (vocab x hidden x 4 bytes) is made once per context; a float32 head
    uses its own weight. Yields the :class:`ScoredHead` (``.gather(batch)``: scored positions only).
    A model without a Linear head is left alone (the head cannot gather)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(head, nn.Linear):
        yield ScoredHead(None, None, None)
        return
    fp32 = head.weight.dtype == torch.float32
    weight = head.weight if fp32 else head.weight.float()
    bias = None if head.bias is None else head.bias.float()
    scored = ScoredHead(head, weight, bias)
    had_own = "forward" in vars(head)
    previous = vars(head).get("forward")
    head.forward = scored.forward
    try:
        yield scored
    finally:
        if had_own:
            head.forward = previous
        else:
            del head.forward


def score(model, tokenizer_or_encoded, examples=None, batch_size: int = 32,
          forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
          progress: bool = False, name: str = "probe set") -> ProbeScore:
    """Accuracy of ``model`` on a probe set: an EncodedProbe, or a tokenizer plus ``examples``.

    ``forward(input_ids, attention_mask) -> logits (B, T, V)`` overrides the model call
    (default ``model(input_ids=..., attention_mask=...).logits``). Inputs go to the device of
    the model's first parameter.
    """
    from tqdm.auto import tqdm

    if isinstance(tokenizer_or_encoded, EncodedProbe):
        enc = tokenizer_or_encoded
    else:
        if examples is None:
            raise ProbeError(f"{name}: pass examples together with a tokenizer")
        enc = encode(examples, tokenizer_or_encoded, name=name)
    device = next(model.parameters()).device
    keep = forward is None and accepts_logits_to_keep(model)
    logprobs = torch.empty(len(enc), enc.n_choices, dtype=torch.float64)
    per = examples_per_batch(enc, batch_size)
    with torch.no_grad(), fp32_logits(model) as head:
        for batch in tqdm(iter_batches(enc, batch_size), total=-(-len(enc) // per), disable=not progress,
                          desc=name, unit="batch"):
            b = batch.to(device)
            if forward is not None:
                if enc.packed:
                    raise ProbeError(f"{name}: a custom forward takes (input_ids, attention_mask), not packed rows")
                lp = batch_choice_logprobs(forward(b.input_ids, b.attention_mask), b)
            elif head.can_gather:
                lp = gathered_choice_logprobs(scored_logits(model, b, head, keep), b)[0]
            else:
                lp = batch_choice_logprobs(model(**b.model_inputs(model)).logits, b)
            logprobs[batch.examples] = lp.cpu()
    correct = logprobs.argmax(-1) == enc.answers
    return ProbeScore(logprobs=logprobs, answers=enc.answers, correct=correct,
                      accuracy=correct.double().mean().item(), ids=enc.ids)
