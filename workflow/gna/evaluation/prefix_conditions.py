"""Several conditions of one model through lm-eval, the layers they leave unchanged run once.

A condition (a list of interventions, :mod:`gna.interventions.vocabulary`) first changes some layer
``s``; below it the model computes what the unmodified model computes. Per batch of lm-eval's
requests the unmodified model runs once, as far as the highest such ``s``, keeping the residual
stream leaving each layer ``s - 1``; then each condition runs from there: layers ``0..s-2``
skipped and layer ``s - 1`` handing on the kept stream, the condition's interventions applied,
the model's own forward doing the rest (its final norm, LM head and whatever output step the family
applies: softcapping, logit scaling), logits at the scored positions only.

Truncation to ``L`` layers changes layer ``L`` first, and the rest of its forward is skipped layers,
the final norm and the head: Fig. 2's every depth costs one forward of the model plus a head per
depth. Removing layer ``i`` (Fig. 3), ablating a head in layer ``i`` (Table 1) start at ``i``.

lm-eval still builds the requests and computes the metrics. The recording pass
(:func:`recording`) is one ``simple_evaluate`` whose LM computes every condition's (log-prob,
greedy) per request, exactly as lm-eval's ``HFLM._loglikelihood_tokens`` does (its batches, its
one-token-continuation groups, its slices), and returns the first condition's; each other condition
is then a ``simple_evaluate`` with an LM that replays its answers (:func:`replaying`), so its rows
are those of its own evaluation (``tests/test_prefix_conditions.py`` holds them to it, every family).

This holds for every family the adapters describe, SSMs and hybrids included (Mamba-1/2, Zamba2,
whose shared attention block is called inside the layer it serves, Jamba, Bamba, Falcon-H1,
Nemotron-H, Llamba): each model's loop hands only the hidden states from layer to layer, which is
what truncation and removal (:class:`gna.interventions.layers.SkipLayer`) already rely on. No
family keeps per-condition evaluations.

With each context run once (``eval.shared_prefix``, an attention model) the recording pass follows
:mod:`.shared_prefix`'s shapes instead of lm-eval's batches, so that bf16 answers are each
condition's own to the bit (:mod:`.context_conditions`).

Each condition's layers run in its own forward: interventions are hooks on the one model, so conditions do not
share a batch. A task that generates text or scores rolling log-likelihoods runs lm-eval's own
path once per condition in the recording pass (nothing shared there), replayed likewise.
A backend other than a causal LM, or lm-eval's automatic batch size, is not shared
(:class:`NotShared`: the caller evaluates each condition on its own).

In a resuming job (:mod:`gna.resume`) each shared batch's answers (with ``eval.shared_prefix``, each
context's), every condition's, are kept as the unit finishes, and a stopped run's units are not run
again: the same answers, to the bit. The conditions scored on lm-eval's own path (generation,
rolling log-likelihoods) run again.
"""
from __future__ import annotations

import functools
import inspect
import json
from contextlib import ExitStack

import torch
import torch.nn.functional as F
from torch import nn

from ..interventions.vocabulary import applied, first_changed_layer
from ..models import adapter_for
from ..resume.store import section
from .condition_start import residuals_leaving, starting_at
from .context_conditions import SharedContextConditions
from .shared_prefix import shareable


class NotShared(Exception):
    """The evaluation asks for something other than log-likelihoods of a causal LM: evaluate each
    condition on its own."""


def _takes_logits_to_keep(model: nn.Module) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


class RecordingConditions:
    """The recording LM's own methods (:func:`recording` mixes them in before
    :class:`.context_conditions.SharedContextConditions` and lm-eval's ``HFLM``): every condition's
    answers per request, lm-eval answered with the first condition's."""

    conditions: list[list[dict]] = []
    answers: list[dict] = []
    last_answers: list[list] = []
    partial = None   # a resuming job's section (gna.resume): each shared batch's answers kept

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        first = super().loglikelihood(requests, disable_tqdm=disable_tqdm)   # lm-eval's order
        for store, got in zip(self.answers, self.last_answers):
            store.update({request_key("loglikelihood", r): a for r, a in zip(requests, got)})
        return first

    def generate_until(self, requests, disable_tqdm: bool = False):
        return self._each_condition("generate_until", requests, disable_tqdm)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        return self._each_condition("loglikelihood_rolling", requests, disable_tqdm)

    def _each_condition(self, kind: str, requests, disable_tqdm: bool):
        """Generation and rolling log-likelihoods: lm-eval's own, each condition applied in turn
        (nothing shared: a generated token depends on every layer)."""
        out = []
        for condition, store in zip(self.conditions, self.answers):
            with applied(self.model, condition):
                got = getattr(super(), kind)(requests, disable_tqdm=disable_tqdm)
            store.update({request_key(kind, r): g for r, g in zip(requests, got)})
            out.append(got)
        return out[0]

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        if self.backend != "causal" or self.batch_size == "auto":
            raise NotShared(f"backend {self.backend}, batch size {self.batch_size}")
        n = adapter_for(self.model).describe().n_layers
        starts = [first_changed_layer(c, n) for c in self.conditions]
        if hasattr(self, "_score_context") and shareable(self.model):
            # each context run once: the shapes of each condition's own evaluation (.context_conditions)
            self.last_answers = self._context_shared_answers(requests, starts)
        else:
            self.last_answers = self._shared_answers(requests, list(range(len(self.conditions))), starts)
        return self.last_answers[0]

    def _shared_answers(self, requests, conditions: list[int], starts: list[int]) -> list[list]:
        """Per condition of ``conditions`` (indices), the (log-prob, greedy) of each request, from
        one shared forward per batch of lm-eval's."""
        from lm_eval.models.utils import Collator   # lm-eval only where an evaluation runs
        from lm_eval.models.utils_hf import pad_and_concat

        # lm-eval's own ordering and grouping (HFLM._loglikelihood_tokens), so its batches
        re_ord = Collator(requests, sort_fn=lambda r: (-len(r[1] + r[2]), tuple(r[1] + r[2])),
                          group_by="contexts" if self.logits_cache else None,
                          group_fn=lambda r: r[-2] + r[-1][:-1])
        res: list[list] = [[] for _ in conditions]
        for chunk in re_ord.get_batched(n=self.batch_size, batch_fn=None):
            inps, spans = [], []
            for _, context_enc, continuation_enc in chunk:
                inp = (context_enc + continuation_enc)[-(self.max_length + 1):][:-1]
                inps.append(torch.tensor(inp, dtype=torch.long, device=self.device))
                spans.append((len(inp) - len(continuation_enc), len(inp)))
            width = max(len(i) for i in inps)
            batched = pad_and_concat(width, inps, padding_side="right")   # (batch, width)
            # the requests each row answers (several: one-token continuations of one context)
            members = [list(re_ord.get_cache(req_str=r, cxt_toks=ctx, cont_toks=cont,
                                             logits=torch.zeros(1, 1, 1)))
                       for r, ctx, cont in chunk]
            chosen = [self.conditions[c] for c in conditions]
            # a stopped job's finished batch (the same batches: lm-eval's order, fixed by the requests)
            at = [starts[c] for c in conditions]
            tokens = [[list(cont) for _, cont, _ in m] for m in members]
            got = self._kept(["shared batch", chosen, at, batched, tokens],
                             lambda: self._batch_answers(batched, spans, members, chosen, at))
            for c, answers in enumerate(got):
                res[c] += answers
        return [re_ord.get_original(r) for r in res]

    def _batch_answers(self, batched: torch.Tensor, spans, members, chosen, starts) -> list[list]:
        """Per condition of ``chosen`` (starting at ``starts``), the (log-prob, greedy) of each request
        ``members`` serves, in order, from one shared forward of ``batched`` (batch, width)."""
        positions = sorted({p for a, b in spans for p in range(a, b)})
        at = {p: k for k, p in enumerate(positions)}
        out: list[list] = [[] for _ in chosen]
        for c, rows in enumerate(self._condition_logprobs(batched, positions, chosen, starts)):
            for (a, b), row, served in zip(spans, rows, members):
                lp = row[[at[p] for p in range(a, b)]].unsqueeze(0)   # (1, cont, vocab)
                greedy_tokens = lp.argmax(dim=-1)
                for _, cont_toks, _ in served:
                    cont = torch.tensor(cont_toks, dtype=torch.long, device=lp.device).unsqueeze(0)
                    # as lm-eval: greedy over the trailing tokens, log-prob gathered from the front
                    greedy = bool((greedy_tokens[:, -cont.shape[1]:] == cont).all())
                    out[c].append((float(torch.gather(lp, 2, cont.unsqueeze(-1)).sum()), greedy))
        return out

    @torch.no_grad()
    def _condition_logprobs(self, inps: torch.Tensor, positions: list[int], conditions: list[list[dict]],
                            starts: list[int]):
        """Per condition, the float32 log-probs at ``positions`` of each row of ``inps`` (batch,
        width), (batch, len(positions), vocab)."""
        kept = residuals_leaving(self.model, inps, starts)
        keep = torch.tensor(positions, dtype=torch.long, device=inps.device)
        for condition, start in zip(conditions, starts):
            with ExitStack() as stack:
                stack.enter_context(starting_at(self.model, start, kept.get(start)))
                stack.enter_context(applied(self.model, condition))
                if _takes_logits_to_keep(self.model):
                    logits = self.model(inps, logits_to_keep=keep).logits       # (batch, positions, vocab)
                else:
                    logits = self.model(inps).logits[:, positions]
            yield F.log_softmax(logits, dim=-1, dtype=self.softmax_dtype or torch.float32)


@functools.cache
def recording(base: type) -> type:
    """``base`` (lm-eval's ``HFLM``) computing, per request, every condition of ``conditions``
    (lists of interventions) into ``answers`` ([{:func:`request_key`: the answer}], one per
    condition), and answering lm-eval with the first condition's; both class attributes of a
    subclass. ``last_answers``: per condition, the answers of the last token-level call, in order."""

    class Recording(RecordingConditions, SharedContextConditions, base):
        pass

    Recording.__qualname__ = Recording.__name__ = f"Recording{base.__name__}"
    return Recording


def request_key(kind: str, request) -> tuple:
    """An lm-eval ``Instance``'s key among a condition's recorded answers: its kind and arguments."""
    return (kind, json.dumps(request.args, sort_keys=True, default=str))


@functools.cache
def replaying(base: type) -> type:
    """``base`` answering each request from ``answers`` (one condition's, as :func:`recording` kept
    them; a class attribute of a subclass)."""

    class Replaying(base):
        answers: dict = {}

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            # by the request's strings: a replay encodes nothing
            return self._replayed("loglikelihood", requests)

        def generate_until(self, requests, disable_tqdm: bool = False):
            return self._replayed("generate_until", requests)

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            return self._replayed("loglikelihood_rolling", requests)

        def _replayed(self, kind: str, requests) -> list:
            try:
                return [self.answers[request_key(kind, r)] for r in requests]
            except KeyError as e:
                raise RuntimeError(f"a {kind} request the recording pass did not see: the tasks were built "
                                   "differently") from e

    Replaying.__qualname__ = Replaying.__name__ = f"Replaying{base.__name__}"
    return Replaying


def evaluate_conditions(model: nn.Module, tokenizer, tasks: list[str], suite, conditions: list[list[dict]],
                        **settings) -> list:
    """The :class:`~.lm_eval_bridge.Scores` of each of ``conditions`` (lists of interventions), as
    ``evaluate(model, tokenizer, tasks, suite, condition, **settings)`` gives them: one recording
    pass, then one replay per further condition. Where the evaluation cannot be shared
    (:class:`NotShared`), each condition is evaluated on its own."""
    from lm_eval.models.huggingface import HFLM

    from .lm_eval_bridge import evaluate

    conditions = [list(c or []) for c in conditions]
    if not conditions:
        return []
    from .shared_prefix import sharing_contexts

    base = sharing_contexts(HFLM) if settings.get("shared_prefix") else HFLM
    stores: list[dict] = [{} for _ in conditions]
    # in a resuming job, the shared batches a stopped run finished (gna.resume)
    partial = section("evaluate_conditions", tasks, conditions, {k: v for k, v in settings.items() if k != "items"})
    record = type("Recording", (recording(base),), {"conditions": conditions, "answers": stores, "partial": partial})
    try:
        first = evaluate(model, tokenizer, tasks, suite, (), lm_class=record, **settings)
    except NotShared:
        return [evaluate(model, tokenizer, tasks, suite, c, **settings) for c in conditions]
    return [first] + [evaluate(model, tokenizer, tasks, suite, (), **settings,
                               lm_class=type("Replaying", (replaying(base),), {"answers": store}))
                      for store in stores[1:]]
