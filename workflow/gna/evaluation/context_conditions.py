"""Several conditions of one model with each context run once (``eval.shared_prefix``), every tensor
the shape the condition's own evaluation (:mod:`.shared_prefix`) gives it.

In bfloat16 a kernel's rounding depends on its tensor's shape (a padded batch of contexts rounds a
row differently from that row alone), so only equal shapes give each condition the answers of its
own evaluation to the bit. Each context runs alone (one row): the unmodified model's residual
leaving each condition's layer ``s - 1`` is kept from it, and each condition runs from there to the
context's last position. Continuations of several tokens run in the same batches of rows on copies
of the context's cache: a truncation's from the unmodified model's residual on them, a removal's or
an ablation's on its own path (its later tokens read its own cache of the context). What is shared
across conditions beyond the layers below them is the read-out: the model's own forward after its
layers (final norm, LM head, output steps) of every condition's last residual, as one batch checked
against rows alone (:meth:`SharedContextConditions._read_out`). ``tests/test_prefix_conditions.py``
holds the answers equal, not close.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from ..interventions.vocabulary import applied
from ..models import adapter_for
from ..resume.store import fingerprint
from .condition_start import is_truncation, residuals_of, starting_at
from .shared_prefix import continuation_answers, continuation_batches, tail_inputs


def _tokens(requests) -> list:
    """What the model sees of ``requests`` (lm-eval's (strings, context, continuation) tuples)."""
    return [[list(context), list(continuation)] for _, context, continuation in requests]


# What the mixin reads of the class it is mixed into, each with where it comes from. A mixin's reads are
# invisible at its host's definition, so they are listed here, checked on first use (:func:`check_host`),
# and held to the module's own ``self.`` reads by tests/test_context_conditions.py.
HOST_ATTRIBUTES = {
    "conditions": "the conditions, lists of interventions (the recording LM's class attribute)",
    "partial": "a resuming job's section, or None outside one (the recording LM's)",
    "_score_context": "one context's continuations scored (.shared_prefix.sharing_contexts's base)",
    "_loglikelihood_tokens": "a condition's own evaluation, called through super() (lm-eval's HFLM)",
    "model": "the model (HFLM)",
    "device": "its device (HFLM)",
    "batch_size": "rows per batch of continuations (HFLM)",
    "max_length": "the longest request lm-eval leaves untruncated (HFLM)",
    "rank": "the process's rank: only rank 0 shows progress (HFLM)",
    "softmax_dtype": "the log-softmax's dtype, None for float32 (HFLM)",
}


def check_host(lm) -> None:
    """Refuse ``lm`` if it lacks any of :data:`HOST_ATTRIBUTES`, naming them (a TypeError here, not an
    AttributeError deep in a shared evaluation)."""
    missing = [name for name in HOST_ATTRIBUTES if not hasattr(lm, name)]
    if missing:
        raise TypeError(f"{type(lm).__name__} lacks what SharedContextConditions reads of its host: {missing}")


class SharedContextConditions:
    """The conditions' answers of a recording LM (:func:`.prefix_conditions.recording`) whose base
    scores each context once (:func:`.shared_prefix.sharing_contexts`). Everything it reads of that
    class is :data:`HOST_ATTRIBUTES`, checked when it is first asked for answers."""

    _rows_differ = False   # a batched read-out rounded a row differently from that row alone

    def _context_shared_answers(self, requests, starts: list[int]) -> list[list]:
        """Per condition, the (log-prob, greedy) of each request with each context run once
        (eval.shared_prefix), every tensor the shape its own evaluation gives it: each context
        alone, its continuations in the same batches of rows (the same answers to the bit, in
        bfloat16 too, where kernels round by shape)."""
        from tqdm import tqdm

        check_host(self)
        answers: list[list] = [[None] * len(requests) for _ in self.conditions]
        # a condition changing layer 0 shares nothing: its own evaluation, as it is, kept whole
        for c in (c for c, s in enumerate(starts) if s == 0):
            answers[c] = self._kept(["own evaluation", self.conditions[c], _tokens(requests)],
                                    lambda c=c: self._own(c, requests))
        later = [c for c, s in enumerate(starts) if s > 0]
        plain, groups = [], {}
        for i, (_, context, continuation) in enumerate(requests):
            if len(context) + len(continuation) > self.max_length + 1:
                plain.append(i)   # lm-eval truncates it from the left: its own path, in each condition
            else:
                groups.setdefault(tuple(context), []).append(i)
        for c in later if plain else []:
            truncated = [requests[i] for i in plain]
            got = self._kept(["own evaluation", self.conditions[c], _tokens(truncated)],
                             lambda c=c: self._own(c, truncated))
            for i, a in zip(plain, got):
                answers[c][i] = a
        chosen, at = [self.conditions[c] for c in later], [starts[c] for c in later]
        for context, members in tqdm(groups.items(), disable=not later or self.rank != 0,
                                     desc="Running loglikelihood requests (conditions share contexts)"):
            continuations = [requests[i][2] for i in members]
            got = self._kept(["shared context", chosen, at, list(context), continuations],
                             lambda: self._context_answers(list(context), continuations, chosen, at))
            for c, per in zip(later, got):
                for i, a in zip(members, per):
                    answers[c][i] = a
        return answers

    def _own(self, c: int, requests) -> list:
        """Condition ``c``'s answers to ``requests`` from its own evaluation (lm-eval's, unshared)."""
        with applied(self.model, self.conditions[c]):
            return list(super()._loglikelihood_tokens(requests, disable_tqdm=True))

    def _kept(self, what: list, compute):
        """``compute()``, or the answers a stopped run of this job kept for ``what`` (plain data naming
        the unit: its conditions and tokens); a finished unit is kept with its CPU seconds
        (:mod:`gna.resume`). Outside a resuming job (``partial`` None), ``compute()`` alone."""
        return compute() if self.partial is None else self.partial.kept(fingerprint(what), compute)

    @torch.no_grad()
    def _context_answers(self, context: list[int], continuations: list[list[int]], chosen: list[list[dict]],
                         starts: list[int]) -> list[list]:
        """Per condition of ``chosen`` (starting at ``starts`` > 0), the (log-prob, greedy) of each
        continuation after ``context``, as :mod:`.shared_prefix` scores it under that condition alone."""
        dtype = self.softmax_dtype or torch.float32
        out: list = [None] * len(chosen)
        several = any(len(c) > 1 for c in continuations)
        for k, condition in enumerate(chosen):
            # a removal's or an ablation's later tokens read its own cache of the context: its own path
            if several and not is_truncation(condition):
                with applied(self.model, condition):
                    out[k] = self._score_context(context, continuations)
        left = [k for k in range(len(chosen)) if out[k] is None]
        if not left:
            return out
        ids = torch.tensor([context], dtype=torch.long, device=self.device)
        wanted = [starts[k] for k in left]
        # the context as each condition's own evaluation runs it: one row, its cache kept
        kept, cache = residuals_of(self.model, dict(input_ids=ids, use_cache=True, logits_to_keep=1), wanted,
                                  whole=several)
        # each condition's residual leaving the last layer, then the model's own read-out of them all
        finals = [kept[starts[k]] if is_truncation(chosen[k]) else
                  self._final_residual(ids, chosen[k], starts[k], kept[starts[k]]) for k in left]
        firsts = {}
        for k, logits in zip(left, self._read_out(ids, finals)):
            firsts[k] = F.log_softmax(logits.to(dtype), dim=-1)     # (vocab,)
            out[k] = []
        for batch in continuation_batches(continuations, self.batch_size):
            tail = tail_inputs(batch, len(context), self.device)
            rest = dict.fromkeys(left)
            if tail is not None:   # truncations only: their later tokens run the unmodified layers below them
                rows = copy.deepcopy(cache)
                rows.batch_repeat_interleave(len(batch))
                kept_tail, _ = residuals_of(self.model, dict(**tail, past_key_values=rows, use_cache=True),
                                           wanted, whole=False)
                for k in left:
                    with starting_at(self.model, starts[k], kept_tail[starts[k]]), \
                            applied(self.model, chosen[k]):
                        logits = self.model(**tail, use_cache=False).logits      # (rows, rest, vocab)
                    rest[k] = F.log_softmax(logits.to(dtype), dim=-1)
            for k in left:
                out[k] += continuation_answers(firsts[k], batch, rest[k])
        return out

    def _final_residual(self, ids: torch.Tensor, condition: list[dict], start: int,
                        hidden: torch.Tensor) -> torch.Tensor:
        """The residual stream leaving the model's last layer (1, ctx, d_model) under ``condition``,
        run from ``start`` on the unmodified residual ``hidden`` leaving layer ``start - 1``."""
        n = adapter_for(self.model).describe().n_layers
        with starting_at(self.model, start, hidden), applied(self.model, condition):
            return residuals_of(self.model, dict(input_ids=ids, use_cache=True, logits_to_keep=1), [n],
                                whole=False)[0][n]

    def _read_out(self, ids: torch.Tensor, finals: list[torch.Tensor]) -> list[torch.Tensor]:
        """The logits at the last position (vocab,) of each residual of ``finals`` (each (1, ctx,
        d_model), leaving the last layer) through the model's own forward after its layers (final
        norm, LM head, any output step), as one batch where that gives each row its bits alone.

        The LM head reads its whole weight per call (Qwen2.5's 152k x 1536 in bf16: 50 ms of a CPU
        thread), so per condition it would cost a deep forward's worth over Fig. 2's depths; batched,
        once. Whether a batch rounds a row as it rounds it alone depends on the kernels (this CPU's
        bf16 ones do), so the batch is checked against its first and last rows alone, and where they
        differ every row is read out alone from then on."""
        def run(hidden):   # (rows, ctx, d_model) -> (rows, vocab)
            with starting_at(self.model, adapter_for(self.model).describe().n_layers, hidden):
                return self.model(input_ids=ids.expand(len(hidden), -1), use_cache=True,
                                  logits_to_keep=1).logits[:, -1]

        if len(finals) > 2 and not self._rows_differ:
            together = run(torch.cat(finals))
            first, last = run(finals[0]), run(finals[-1])
            if torch.equal(first[0], together[0]) and torch.equal(last[0], together[-1]):
                return list(together)
            self._rows_differ = True
        return [run(f)[0] for f in finals]
