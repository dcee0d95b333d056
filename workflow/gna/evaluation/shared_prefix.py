"""lm-eval's log-likelihoods with each context run once (``eval.shared_prefix``).

lm-eval's ``HFLM`` runs every (context, continuation) request as its own sequence: a cloze
multiple-choice question with 4 answer texts runs its context 4 times, and on a CPU that is most
of an MMLU cloze evaluation (~100 context tokens against ~20 of answer). Here the context runs
once, its key-value cache is copied to the continuations, and the continuations run together:
the same log-probabilities up to float rounding (``tests/test_shared_prefix.py`` holds them to
lm-eval's within 1e-4 under every layer and head intervention), 2-3x fewer tokens through the
model. A one-token continuation (MMLU's letter) reads the context's last position, as lm-eval's
own one-token lookup does; and the context's other positions get no logits at all (lm-eval computes
them and throws them away: for Qwen2.5's 152k-token vocabulary the LM head costs as much as 5 of
its 28 layers per position).

Requests that lm-eval would truncate, models with a mixer other than attention (their caches are
not key-value caches) and a model whose first layer is skipped (the cache's length is read off
layer 0) go through lm-eval's own path, unchanged.
"""
from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F


def shareable(model) -> bool:
    """Can ``model``'s evaluation share contexts: attention mixers only, layer 0 in place?"""
    from ..interventions.layers import SkipLayer
    from ..models import adapter_for, attention_only

    # a model the adapters do not know is not attention-only: lm-eval's own path
    return attention_only(model) and not isinstance(adapter_for(model).layers()[0], SkipLayer)


@functools.cache
def sharing_contexts(base: type) -> type:
    """``base`` (lm-eval's ``HFLM`` or a subclass) scoring each distinct context once."""

    class SharingContexts(base):
        def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
            if not shareable(self.model):
                return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
            out: list = [None] * len(requests)
            plain, groups = [], {}
            for i, (_, context, continuation) in enumerate(requests):
                if len(context) + len(continuation) > self.max_length + 1:
                    plain.append(i)   # lm-eval truncates it from the left: its own path
                else:
                    groups.setdefault(tuple(context), []).append(i)
            if plain:
                done = super()._loglikelihood_tokens([requests[i] for i in plain], disable_tqdm=disable_tqdm,
                                                     override_bs=override_bs)
                for i, answer in zip(plain, done):
                    out[i] = answer
            from tqdm import tqdm

            for context, members in tqdm(groups.items(), disable=disable_tqdm or self.rank != 0,
                                         desc="Running loglikelihood requests (contexts shared)"):
                answers = self._score_context(list(context), [requests[i][2] for i in members])
                for i, answer in zip(members, answers):
                    out[i] = answer
                    self.cache_hook.add_partial("loglikelihood", requests[i][0], answer)
            return out

        @torch.no_grad()
        def _score_context(self, context: list[int], continuations: list[list[int]]) -> list[tuple[float, bool]]:
            """(log-prob, greedy) of each continuation after ``context``: the context once, then the
            continuations' tokens but their last, in batches of ``batch_size`` rows on copies of its cache."""
            dtype = self.softmax_dtype or torch.float32
            ids = torch.tensor([context], dtype=torch.long, device=self.device)
            first = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)   # the context's last position only
            first_logp = F.log_softmax(first.logits[0, -1].to(dtype), dim=-1)       # (vocab,): the first token
            answers = []
            for batch in continuation_batches(continuations, self.batch_size):
                rest_logp = None
                tail = tail_inputs(batch, len(context), self.device)
                if tail is not None:
                    cache = copy.deepcopy(first.past_key_values)
                    cache.batch_repeat_interleave(len(batch))
                    logits = self.model(**tail, past_key_values=cache, use_cache=True).logits
                    rest_logp = F.log_softmax(logits.to(dtype), dim=-1)              # (batch, rest, vocab)
                answers += continuation_answers(first_logp, batch, rest_logp)
            return answers

    SharingContexts.__qualname__ = SharingContexts.__name__ = f"SharingContexts{base.__name__}"
    return SharingContexts


def continuation_batches(continuations: list[list[int]], batch_size) -> list[list[list[int]]]:
    """The continuations of one context in the batches of rows :func:`sharing_contexts` runs them in."""
    rows = int(batch_size) if str(batch_size).isdigit() else 8
    return [continuations[s:s + rows] for s in range(0, len(continuations), rows)]


def tail_inputs(batch: list[list[int]], context_len: int, device) -> dict | None:
    """The model inputs of a batch of continuations after a cached context of ``context_len``
    tokens: each continuation's tokens but its last, right-padded ((rows, rest) ``input_ids``, their
    positions); ``None`` where every continuation is one token (the context's last position scores it)."""
    rest = max(len(c) for c in batch) - 1
    if rest <= 0:
        return None
    tail = torch.zeros(len(batch), rest, dtype=torch.long, device=device)
    for b, c in enumerate(batch):
        tail[b, :len(c) - 1] = torch.tensor(c[:-1], dtype=torch.long)
    positions = torch.arange(context_len, context_len + rest, device=device)
    return {"input_ids": tail, "position_ids": positions.expand(len(batch), -1), "cache_position": positions}


def continuation_answers(first_logp: torch.Tensor, batch: list[list[int]],
                         rest_logp: torch.Tensor | None) -> list[tuple[float, bool]]:
    """(log-prob, greedy) of each continuation of ``batch`` from the first token's log-probs
    ``first_logp`` (vocab,) and the later tokens' ``rest_logp`` (rows, rest, vocab)."""
    answers = []
    for b, c in enumerate(batch):
        logp = first_logp.unsqueeze(0) if len(c) == 1 else torch.cat(
            [first_logp.unsqueeze(0), rest_logp[b, :len(c) - 1]])       # (len(c), vocab)
        target = torch.tensor(c, dtype=torch.long, device=logp.device)
        greedy = bool((logp.argmax(dim=-1) == target).all())
        answers.append((float(logp.gather(1, target[:, None]).sum()), greedy))
    return answers
