"""Attribution patching (AtP) of single-head zero-ablation, for every head kind the adapters describe.

A head is a slice ``a_h`` of its mixer's output-projection input (the place :func:`ablate_heads`
zeroes). Zeroing it changes a retrieval score S by, to first order, ``-(a_h . dS/da_h)`` summed
over the slice and all positions; one forward and one backward per batch of probe prompts give
that for every head at once (weights frozen: gradients flow to the activations only).

The score (``score=``), summed over examples:
- ``"margin"`` (default): the correct choice's summed log-prob minus the best other choice's. Its
  sign is the example's correctness, so its drop tracks the accuracy drop the exact scan ranks by;
  the correct log-prob alone also moves when every choice moves together, which does not flip an
  answer. With one choice it is the correct log-prob.
- ``"logprob"``: the correct choice's summed log-prob (the exact scan's ``logprob_drop``).

AtP* (Kramar et al. 2024, arXiv 2403.00745) corrects two failure modes. Its QK fix recomputes the
attention softmax exactly when the patched node is a query or key; a head's output is read after
its own softmax, so the fix does not apply to this node. GradDrop (``graddrop=True``) addresses
cancellation between paths: for each layer l the gradient is taken with layer l's residual
contribution blocked, and the estimate is ``sum_l |AtP_l| / (L - 1)``, a magnitude (no sign).
"""
from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager
from typing import Iterator

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import InterventionError
from ..interventions.hooks import check_hookable, rewrite_heads
from ..models import adapter_for
from ..models.description import Mixer
from ..probes.encoded import EncodedProbe
from ..probes.scoring import (ProbeBatch, ScoredHead, accepts_logits_to_keep, batch_choice_logprobs, fp32_logits,
                              gathered_choice_logprobs, iter_batches, scored_logits)

SCORES = ("margin", "logprob")
ATP_COLUMNS = ["layer", "head", "kind", "atp_drop", "atp_magnitude"]


def choice_score(lp: torch.Tensor, answers: torch.Tensor, score: str = "margin") -> torch.Tensor:
    """Per-example score ``(E,)`` from choice log-probs ``lp (E, C)`` and ``answers (E,)``."""
    if score not in SCORES:
        raise InterventionError(f"scan.atp_score = {score!r}: expected one of {', '.join(SCORES)}")
    correct = lp.gather(1, answers[:, None]).squeeze(1)
    if score == "logprob" or lp.shape[1] == 1:
        return correct
    others = lp.masked_fill(nn.functional.one_hot(answers, lp.shape[1]).bool(), -math.inf)
    return correct - others.max(1).values


@contextmanager
def frozen(model: nn.Module) -> Iterator[None]:
    """No parameter gradients: autograd records the activation paths only. Flags restored on exit."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        yield
    finally:
        for p, f in flags:
            p.requires_grad_(f)


@contextmanager
def head_activations(mixers: list[Mixer], scale: float = 1.0) -> Iterator[dict[Mixer, list[torch.Tensor]]]:
    """Record each mixer's heads ``(..., n_heads, head_dim)`` as they enter its output projection,
    one tensor per call, in the autograd graph. The first recorded (no grad upstream: weights are
    frozen) becomes a leaf that requires grad, so every later activation depends on it. ``scale``:
    what goes on into the projection is ``scale`` x the recorded heads (a point on the path on
    which every head goes to zero together: the integrated-gradients estimate)."""
    got: dict[Mixer, list[torch.Tensor]] = {m: [] for m in mixers}

    def record(m: Mixer):
        def fn(x):
            if not x.requires_grad:
                x = x.detach().requires_grad_(True)
            got[m].append(x)
            return x if scale == 1.0 else x * scale
        return fn

    with ExitStack() as stack:
        for m in mixers:
            stack.enter_context(rewrite_heads(m, record(m)))
        yield got


class _BlockGrad(torch.autograd.Function):
    """Forward: the layer's output unchanged. Backward: while ``flag[0]``, the gradient skips the
    layer's own contribution and reaches its input through the residual only (GradDrop)."""

    @staticmethod
    def forward(ctx, out, inp, flag):
        ctx.flag = flag
        return out.clone()

    @staticmethod
    def backward(ctx, g):
        return (None, g, None) if ctx.flag[0] else (g, None, None)


@contextmanager
def blockable_layers(model: nn.Module) -> Iterator[list[list[bool]]]:
    """Wrap every decoder layer's output in :class:`_BlockGrad`; returns one flag per layer."""
    layers = adapter_for(model).layers()
    flags = [[False] for _ in layers]
    inputs: dict[int, torch.Tensor] = {}
    handles = []
    for i, layer in enumerate(layers):
        def pre(module, args, kwargs, i=i):
            inputs[i] = args[0] if args else kwargs["hidden_states"]

        def post(module, args, kwargs, out, i=i):
            hidden = out[0] if isinstance(out, tuple) else out
            if inputs[i].shape != hidden.shape:
                raise InterventionError(f"GradDrop: layer {i} maps {tuple(inputs[i].shape)} to {tuple(hidden.shape)}")
            new = _BlockGrad.apply(hidden, inputs[i], flags[i])
            return (new,) + tuple(out[1:]) if isinstance(out, tuple) else new

        handles += [layer.register_forward_pre_hook(pre, with_kwargs=True),
                    layer.register_forward_hook(post, with_kwargs=True)]
    try:
        yield flags
    finally:
        for h in handles:
            h.remove()


def _integrated_estimates(model, b: ProbeBatch, answers, mixers, score, keep, head: ScoredHead,
                          steps: int) -> dict[Mixer, torch.Tensor]:
    """``(1, E, n_heads)``: the midpoint-rule integral of ``a_h . dS_e/da_h`` along the path on which
    every head is scaled from 1 to 0 together, ``steps`` points (EAP-IG's estimate, Hanna et al. 2024,
    with zero ablation as the corrupted input); the recorded ``a_h`` is the activation on the path."""
    out = None
    for k in range(steps):
        alpha = (k + 0.5) / steps
        est = _batch_estimates(model, b, answers, mixers, score, keep, False, head, scale=alpha)
        # grad w.r.t. the recorded (unscaled) heads is alpha x dS/d(alpha a): divide it back out
        out = {m: e / alpha / steps for m, e in est.items()} if out is None else \
            {m: out[m] + e / alpha / steps for m, e in est.items()}
    return out


def _batch_estimates(model, b: ProbeBatch, answers, mixers, score, keep, graddrop,
                     head: ScoredHead, scale: float = 1.0) -> dict[Mixer, torch.Tensor]:
    """Per example of the batch: ``a_h . dS_e/da_h`` per head of each mixer (the predicted drop of
    example e's score), ``(R, E, n_heads)``: R = 1, or with ``graddrop`` 1 + L, row 1 + l with layer
    l's contribution blocked. The LM head runs at the scored positions only (``head.gather``)."""
    with ExitStack() as stack:
        acts = stack.enter_context(head_activations(mixers, scale))
        flags = stack.enter_context(blockable_layers(model)) if graddrop else []
        if head.can_gather:
            lp = gathered_choice_logprobs(scored_logits(model, b, head, keep), b)[0]
        else:
            kw = dict(**b.model_inputs(model), use_cache=False)
            if keep:
                kw["logits_to_keep"] = b.keep_pos
            lp = batch_choice_logprobs(model(**kw).logits, b)
        S = choice_score(lp, answers, score).sum()
    for m, got in acts.items():
        if len(got) != 1:
            raise InterventionError(f"layer {m.layer} {m.kind}: its output projection ran {len(got)} times in one "
                                    f"forward, expected once")
    inputs = [got[0] for got in acts.values()]
    E = len(b.examples)
    example_of_row = b.row_example  # rows: one per example, or one per choice no other choice's row extends
    out = {m: torch.zeros(1 + len(flags), E, m.n_heads, dtype=torch.float64) for m in mixers}
    for r, drop in enumerate([None] + list(range(len(flags)))):
        if drop is not None:
            flags[drop][0] = True
        grads = torch.autograd.grad(S, inputs, retain_graph=r < len(flags), allow_unused=True)
        if drop is not None:
            flags[drop][0] = False
        for m, a, g in zip(mixers, inputs, grads):
            if g is None:  # no path to the score (a head blocked by GradDrop, or never read)
                continue
            rows = (a.detach().double() * g.double()).sum(dim=(1, 3))  # (B, n_heads): positions, head_dim
            out[m][r] = rows.new_zeros(E, m.n_heads).index_add_(0, example_of_row, rows).cpu()
    return out


def atp_scan(model: nn.Module, encoded: EncodedProbe, mixers: list[Mixer], batch_size: int = 32,
             score: str = "margin", graddrop: bool = False, progress: bool = True,
             ig_steps: int = 0) -> pd.DataFrame:
    """The AtP estimate of every head of ``mixers``: a table of ``ATP_COLUMNS``.

    ``atp_drop``: the mean over examples of the predicted drop of the score when the head alone is
    zeroed (``-(-a_h . dS/da_h)``; positive = the head helps retrieval). ``atp_magnitude``, what the
    scan methods rank by: the mean over examples of each example's ``|predicted drop|`` (a head whose
    ablation flips some answers one way and some the other has a small mean but changes the
    accuracy; on the micro models this finds the exact top-5 much earlier than ``|atp_drop|``:
    docs/fast-scan.md). With ``graddrop``, AtP*'s GradDrop magnitude ``sum_l |AtP_l| / (L - 1)`` instead, from
    L more backward passes per batch. With ``ig_steps`` > 0, the integrated-gradients estimate
    instead (:func:`_integrated_estimates`: ``ig_steps`` forwards and backwards per batch).
    """
    if ig_steps and graddrop:
        raise InterventionError("atp_scan: graddrop and ig_steps are two estimates; choose one")
    if score not in SCORES:
        raise InterventionError(f"scan.atp_score = {score!r}: expected one of {', '.join(SCORES)}")
    check_hookable(model, mixers)
    device = next(model.parameters()).device
    keep = accepts_logits_to_keep(model)
    signed = {m: 0.0 for m in mixers}  # (R, n_heads) sums over examples
    per_example_abs = {m: 0.0 for m in mixers}  # (n_heads,)
    batches = list(iter_batches(encoded, batch_size))
    with frozen(model), torch.enable_grad(), fp32_logits(model) as head:  # log-probs in fp32, as the exact scan's
        for batch in tqdm(batches, desc="attribution", unit="batch", disable=not progress):
            b = batch.to(device)
            answers = encoded.answers[batch.examples].to(device)
            ests = (_integrated_estimates(model, b, answers, mixers, score, keep, head, ig_steps) if ig_steps
                    else _batch_estimates(model, b, answers, mixers, score, keep, graddrop, head))
            for m, est in ests.items():
                signed[m] += est.sum(1)
                per_example_abs[m] += est[0].abs().sum(0)
    n, n_layers = len(encoded), len(adapter_for(model).layers())
    # GradDrop: |.| of each blocked layer's mean over examples, summed over the layers
    magnitude = {m: signed[m][1:].abs().sum(0) / max(1, n_layers - 1) if graddrop else per_example_abs[m]
                 for m in mixers}
    rows = [dict(layer=m.layer, head=h, kind=m.kind, atp_drop=float(signed[m][0, h]) / n,
                 atp_magnitude=float(magnitude[m][h]) / n)
            for m in mixers for h in range(m.n_heads)]
    return pd.DataFrame(rows, columns=ATP_COLUMNS)
