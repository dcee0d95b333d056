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
:mod:`.shared_prefix`'s shapes instead of lm-eval's batches: each context alone (one row), the
unmodified model's residual leaving each condition's layer ``s - 1`` kept from it, each condition
from there to the context's last position; continuations of several tokens in the same batches of
rows on copies of the context's cache, a truncation's from the unmodified model's residual on them,
a removal's or an ablation's on its own path (its later tokens read its own cache of the context).
In bfloat16 a kernel's rounding depends on its tensor's shape (a padded batch of contexts rounds a
row differently from that row alone), so only equal shapes give each condition the answers of its
own evaluation to the bit; ``tests/test_prefix_conditions.py`` holds them equal, not close.

Each condition's forward is its own: interventions are hooks on the one model, so conditions do not
share a batch. A task that generates text or scores rolling log-likelihoods runs lm-eval's own
path once per condition in the recording pass (nothing shared there), replayed likewise.
A backend other than a causal LM, or lm-eval's automatic batch size, is not shared
(:class:`NotShared`: the caller evaluates each condition on its own).

In a resuming job (:mod:`gna.resume`) each shared batch's answers, every condition's, are kept as the
batch finishes, and a stopped run's batches are not run again: the same answers, to the bit. The
conditions scored on lm-eval's own path (generation, rolling log-likelihoods, and with
``eval.shared_prefix`` a removal's or an ablation's answers of several tokens) run again.
"""
from __future__ import annotations

import copy
import functools
import inspect
import json
from contextlib import ExitStack, contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..interventions.layers import SkipLayer, replace_layers
from ..interventions.vocabulary import applied, first_changed_layer
from ..models import adapter_for
from ..resume.store import fingerprint, section
from .shared_prefix import continuation_batches, continuation_answers, shareable, tail_inputs


class NotShared(Exception):
    """The evaluation asks for something other than log-likelihoods of a causal LM: evaluate each
    condition on its own."""


class _HandOn(SkipLayer):
    """Layer ``s - 1`` of a condition that starts at ``s``: ignores its input and hands on the
    unmodified model's residual stream leaving it, ``hidden`` (batch, seq, d_model)."""

    def __init__(self, replaced: nn.Module, hidden: torch.Tensor, as_tuple: bool | int):
        super().__init__(replaced, as_tuple)
        self.hidden = hidden

    def forward(self, hidden_states, *args, **kwargs):
        if hidden_states.shape != self.hidden.shape:
            raise RuntimeError(f"the kept residual {tuple(self.hidden.shape)} does not fit the layer input "
                               f"{tuple(hidden_states.shape)}")
        return super().forward(self.hidden)


@contextmanager
def starting_at(model: nn.Module, start: int, hidden: torch.Tensor | None) -> Iterator[nn.Module]:
    """``model`` with layers ``0..start-2`` skipped and layer ``start - 1`` handing on ``hidden``
    (the unmodified model's residual leaving it, (batch, seq, d_model)); ``start`` 0: unchanged."""
    if start == 0:
        yield model
        return
    adapter = adapter_for(model)
    layers, as_tuple = adapter.layers(), adapter.layer_returns_tuple
    swaps = {i: SkipLayer(layers[i], as_tuple) for i in range(start - 1)}
    swaps[start - 1] = _HandOn(layers[start - 1], hidden, as_tuple)
    with replace_layers(model, swaps):
        yield model


class _Enough(Exception):
    """Raised inside the unmodified forward once every wanted residual is kept."""


@torch.no_grad()
def residuals_leaving(model: nn.Module, inps: torch.Tensor, starts: list[int]) -> dict[int, torch.Tensor]:
    """{s: the unmodified model's residual stream leaving layer ``s - 1``, (batch, seq, d_model)} for
    each ``s`` > 0 of ``starts``, from one forward stopped after the last layer wanted."""
    layers = adapter_for(model).layers()
    wanted = sorted({s for s in starts if s > 0})
    got: dict[int, torch.Tensor] = {}
    handles = []
    for s in wanted:
        def keep(module, args, output, s=s):
            got[s] = output[0] if isinstance(output, (tuple, list)) else output
            if len(got) == len(wanted):
                raise _Enough

        handles.append(layers[s - 1].register_forward_hook(keep))
    try:
        if wanted:
            model(inps)
    except _Enough:
        pass
    finally:
        for h in handles:
            h.remove()
    return got


def _unmodified(model: nn.Module, inputs: dict, starts: list[int], whole: bool):
    """({s: the unmodified model's residual stream leaving layer ``s - 1``}, its cache) for one
    forward of ``inputs``; stopped after the last layer wanted unless ``whole`` (its cache complete)."""
    layers = adapter_for(model).layers()
    wanted = sorted(set(starts))
    got: dict[int, torch.Tensor] = {}
    handles = []
    for s in wanted:
        def keep(module, args, output, s=s):
            got[s] = output[0] if isinstance(output, (tuple, list)) else output
            if len(got) == len(wanted) and not whole:
                raise _Enough

        handles.append(layers[s - 1].register_forward_hook(keep))
    try:
        out = model(**inputs)
    except _Enough:
        out = None
    finally:
        for h in handles:
            h.remove()
    return got, None if out is None else out.past_key_values


def _truncation(condition: list[dict]) -> bool:
    return all(next(iter(spec)) == "truncate" for spec in condition)


def _takes_logits_to_keep(model: nn.Module) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


@functools.cache
def recording(base: type) -> type:
    """``base`` (lm-eval's ``HFLM``) computing, per request, every condition of ``conditions``
    (lists of interventions) into ``answers`` ([{:func:`request_key`: the answer}], one per
    condition), and answering lm-eval with the first condition's; both class attributes of a
    subclass. ``last_answers``: per condition, the answers of the last token-level call, in order."""
    from lm_eval.models.utils import Collator
    from lm_eval.models.utils_hf import pad_and_concat

    class Recording(base):
        conditions: list[list[dict]] = []
        answers: list[dict] = []
        last_answers: list[list] = []
        partial = None   # a resuming job's section (gna.resume): each shared batch's answers kept
        _rows_differ = False   # a batched read-out rounded a row differently from that row alone

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
            everyone = list(range(len(self.conditions)))
            if hasattr(self, "_score_context") and shareable(self.model):
                self.last_answers = self._context_shared_answers(requests, starts)
                return self.last_answers[0]
            # With each context run once (eval.shared_prefix: a base sharing contexts), a continuation
            # of several tokens costs its context once per condition; from a kept residual it runs
            # its whole row instead. A condition that runs layers past its start (not a truncation)
            # scores those requests on the base's own path, under its interventions.
            own = [c for c in everyone if hasattr(self, "_score_context")
                   and any(next(iter(spec)) != "truncate" for spec in self.conditions[c])]
            long = [i for i, r in enumerate(requests) if len(r[2]) > 1] if own else []
            short = sorted(set(range(len(requests))) - set(long))
            answers: list[list] = [[None] * len(requests) for _ in everyone]

            def fill(indices, conditions, got):
                for c, per in zip(conditions, got):
                    for i, a in zip(indices, per):
                        answers[c][i] = a

            if short:
                fill(short, everyone, self._shared_answers([requests[i] for i in short], everyone, starts))
            cheap = [c for c in everyone if c not in own]
            if long and cheap:
                fill(long, cheap, self._shared_answers([requests[i] for i in long], cheap, starts))
            for c in own if long else []:
                with applied(self.model, self.conditions[c]):
                    fill(long, [c], [super()._loglikelihood_tokens([requests[i] for i in long], disable_tqdm=True)])
            self.last_answers = answers
            return answers[0]

        def _context_shared_answers(self, requests, starts: list[int]) -> list[list]:
            """Per condition, the (log-prob, greedy) of each request with each context run once
            (eval.shared_prefix), every tensor the shape its own evaluation gives it: each context
            alone, its continuations in the same batches of rows (the same answers to the bit, in
            bfloat16 too, where kernels round by shape)."""
            from tqdm import tqdm

            answers: list[list] = [[None] * len(requests) for _ in self.conditions]
            # a condition changing layer 0 shares nothing: its own evaluation, as it is
            for c in (c for c, s in enumerate(starts) if s == 0):
                with applied(self.model, self.conditions[c]):
                    answers[c] = list(super()._loglikelihood_tokens(requests, disable_tqdm=True))
            later = [c for c, s in enumerate(starts) if s > 0]
            plain, groups = [], {}
            for i, (_, context, continuation) in enumerate(requests):
                if len(context) + len(continuation) > self.max_length + 1:
                    plain.append(i)   # lm-eval truncates it from the left: its own path, in each condition
                else:
                    groups.setdefault(tuple(context), []).append(i)
            for c in later if plain else []:
                with applied(self.model, self.conditions[c]):
                    got = super()._loglikelihood_tokens([requests[i] for i in plain], disable_tqdm=True)
                for i, a in zip(plain, got):
                    answers[c][i] = a
            chosen, at = [self.conditions[c] for c in later], [starts[c] for c in later]
            for context, members in tqdm(groups.items(), disable=not later or self.rank != 0,
                                         desc="Running loglikelihood requests (conditions share contexts)"):
                continuations = [requests[i][2] for i in members]
                key = None if self.partial is None else fingerprint(
                    ["shared context", chosen, at, list(context), continuations])
                got = None if key is None else self.partial.get(key)
                if got is None:
                    got = self._context_answers(list(context), continuations, chosen, at)
                    if key is not None:
                        self.partial.put(key, got)
                for c, per in zip(later, got):
                    for i, a in zip(members, per):
                        answers[c][i] = a
            return answers

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
                if several and not _truncation(condition):
                    with applied(self.model, condition):
                        out[k] = self._score_context(context, continuations)
            left = [k for k in range(len(chosen)) if out[k] is None]
            if not left:
                return out
            ids = torch.tensor([context], dtype=torch.long, device=self.device)
            wanted = [starts[k] for k in left]
            # the context as each condition's own evaluation runs it: one row, its cache kept
            kept, cache = _unmodified(self.model, dict(input_ids=ids, use_cache=True, logits_to_keep=1), wanted,
                                      whole=several)
            # each condition's residual leaving the last layer, then the model's own read-out of them all
            finals = [kept[starts[k]] if _truncation(chosen[k]) else
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
                    kept_tail, _ = _unmodified(self.model, dict(**tail, past_key_values=rows, use_cache=True),
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
            last = adapter_for(self.model).describe().n_layers - 1
            got = {}
            with starting_at(self.model, start, hidden), applied(self.model, condition):
                def keep(module, args, output):
                    got["h"] = output[0] if isinstance(output, (tuple, list)) else output
                    raise _Enough

                handle = adapter_for(self.model).layers()[last].register_forward_hook(keep)
                try:
                    self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
                except _Enough:
                    pass
                finally:
                    handle.remove()
            return got["h"]

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

        def _shared_answers(self, requests, conditions: list[int], starts: list[int]) -> list[list]:
            """Per condition of ``conditions`` (indices), the (log-prob, greedy) of each request, from
            one shared forward per batch of lm-eval's."""
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
                key = None if self.partial is None else fingerprint(
                    ["shared batch", chosen, [starts[c] for c in conditions], batched,
                     [[list(cont) for _, cont, _ in m] for m in members]])
                got = None if key is None else self.partial.get(key)
                if got is None:
                    got = self._batch_answers(batched, spans, members, chosen, [starts[c] for c in conditions])
                    if key is not None:
                        self.partial.put(key, got)
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
