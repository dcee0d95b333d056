"""Which Gather feeds which Aggregate: path patching of attention heads, by component and position.

Remove sender head g's output (layer l_g) only from what receiver head a (layer l_a > l_g) reads
through its query, key or value (``components``: any of ``q``, ``k``, ``v``), at every position or
at some (``positions``: ``all``; ``values``, the tokens of every dictionary value; ``final``, the
positions the answer is read at), and from nothing else, then measure KV retrieval. g writes
``delta_g = W_O[:, g] z_g`` into the residual stream (``z_g``: g's slice of its ``o_proj`` input,
which the scan's ablation zeroes; weights are never edited). a's chosen projections are recomputed on
``norm(x_{l_a} - delta_g)`` (the layer's own ``input_layernorm``) at the chosen positions, while
every other head, a's other projections and every later layer read the unpatched stream:
``via="direct"``, g's own write into a removed. ``via="all"``: a's chosen projections read the stream
as it is with g ablated (g's write and what the MLPs and heads between make of it), the rest of the
model the unablated stream: every path from g into a through them.

:func:`path_to_logits` is another path, named apart in every row (``target``: ``head`` or
``logits``): g's own write removed only from the stream the final norm and the LM head read.

Expressible where a head's input is the layer's normed residual through ``q_proj`` / ``k_proj`` /
``v_proj``: attention decoders (Llama, Qwen2, Mistral, ...), through the project's adapters. With
grouped K/V (GQA) a's K/V head is shared by its group of query heads, so a K or V patch reaches that
group (``kv_group`` in the rows says how many); a Q patch reaches a alone. Not expressible, and
refused with the reason: Mamba / Mamba-2 heads (a head's own input, its x, B, C and dt, comes out of
one ``in_proj`` and a causal convolution shared across heads, with no module boundary per head) and
Zamba2's shared attention (its input is the residual concatenated with the embeddings, read by one
block at several depths).
"""
from __future__ import annotations

import re
from collections import defaultdict
from contextlib import ExitStack

import pandas as pd
import torch
from torch import nn

from ..errors import HeadIndexError, InterventionError
from ..interventions import ablate_heads, capture_layer_inputs
from ..models import adapter_for
from ..probes.encoded import EncodedProbe
from ..probes.scoring import ProbeScore, score
from ..scan.repeated_forwards import item_means
from .head_sets import recorder, repeated_forward_scores, set_name


def _attention(model: nn.Module, layer: int, kind: str):
    """(mixer, decoder layer) of an attention head whose K/V input path patching can rewrite."""
    adapter = adapter_for(model)
    mixer = adapter.describe().mixer(layer, kind)
    block = adapter.layers()[layer]
    attn = mixer.module
    if kind != "attention":
        raise InterventionError(f"path patching needs attention heads: a {kind} head's own input (x, B, C, dt) "
                                "leaves one in_proj and a convolution shared across heads, no per-head module")
    if mixer.invocation is not None:
        raise InterventionError("path patching: this attention block is shared across layers and reads the "
                                "residual with the embeddings (Zamba2); its keys' input is not one layer's stream")
    if not all(hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj")) or not hasattr(block, "input_layernorm"):
        raise InterventionError(f"path patching: layer {layer}'s attention has no q_proj / k_proj / v_proj behind "
                                "an input_layernorm")
    return mixer, block


COMPONENTS = ("q", "k", "v")
POSITIONS = ("all", "values", "final")
_VALUE_LINE = re.compile(r"^(?P<key>\S+?)[: ](?P<value>\d+)$")   # a dictionary line, as gna.patterns.ga_roles reads it


def value_positions(examples, tokenizer, encoded: EncodedProbe) -> list[list[int]]:
    """Per example, the token positions of every dictionary value in its prompt (``key value`` or
    ``key:value`` lines), in the token ids ``encoded`` holds (checked equal: a prompt the tokenizer
    splits otherwise is refused)."""
    out = []
    for i, ex in enumerate(examples):
        ctx = ex["prompt"].rstrip()
        enc = tokenizer(ctx, return_offsets_mapping=True, add_special_tokens=True)
        if list(enc["input_ids"]) != list(encoded.prompt_ids[i]):
            raise InterventionError(f"path patching at the value tokens: example {ex.get('id')!r} tokenizes "
                                    "otherwise with offsets than in the probe's encoding")
        spans, pos = [], 0
        for line in ctx.split("\n"):
            m = _VALUE_LINE.match(line)
            if m:
                spans.append((pos + m.start("value"), pos + m.end("value")))
            pos += len(line) + 1
        out.append([t for t, (a, b) in enumerate(enc["offset_mapping"]) if b > a and any(a < e and b > s
                                                                                      for s, e in spans)])
        if not out[-1]:
            raise InterventionError(f"path patching at the value tokens: example {ex.get('id')!r} has no "
                                    "dictionary line (key value)")
    return out


def _components(components) -> tuple[str, ...]:
    got = tuple(dict.fromkeys(components))
    if not got or any(c not in COMPONENTS for c in got):
        raise InterventionError(f"path patching components {components!r}: expected some of q, k, v")
    return got


def _position_mask(b, T: int, positions: str, values: list[list[int]] | None) -> torch.Tensor | None:
    """(B, T) bool: the positions a batch's patch writes at; None for every position. ``final``: every
    position a score is read at; ``values``: the value tokens of the row's example (a row starts with
    its example's prompt, one row per example or per (example, choice))."""
    if positions == "all":
        return None
    mask = torch.zeros(b.input_ids.shape[0], T, dtype=torch.bool, device=b.input_ids.device)
    if positions == "final":
        mask[b.score_rows, b.score_pos] = True
        return mask
    row_example = torch.full((b.input_ids.shape[0],), -1, dtype=torch.long)
    row_example[b.score_rows[b.target_index].cpu()] = (b.target_slot // b.n_choices).cpu()
    for row, e in enumerate(row_example.tolist()):
        if e >= 0:
            mask[row, values[int(b.examples[e])]] = True
    return mask


def _checked_paths(model: nn.Module, paths, via: str, components, positions: str,
                   values: list[list[int]] | None) -> tuple[list[tuple[tuple, tuple]], tuple]:
    """:func:`path_patch`'s ``paths`` as (sender, receiver) tuples and its ``components``, each refused
    before any compute where the model or the other settings cannot run it."""
    if via not in ("direct", "all"):
        raise InterventionError(f"path patching via {via!r}: expected 'direct' or 'all'")
    if positions not in POSITIONS or (positions == "values" and values is None):
        raise InterventionError(f"path patching positions {positions!r}: expected one of {', '.join(POSITIONS)} "
                                "('values' with the value tokens' positions)")
    components = _components(components)
    paths = [(tuple(s), tuple(r)) for s, r in paths]
    for (ls, hs, ks), (lr, hr, kr) in paths:
        if ls >= lr:
            raise HeadIndexError(f"path {set_name([(ls, hs, ks)])} -> {set_name([(lr, hr, kr)])}: the sender must "
                                 "sit in a lower layer than the receiver")
        _attention(model, ls, ks)
        _attention(model, lr, kr)
        for l, h, k in ((ls, hs, ks), (lr, hr, kr)):
            adapter_for(model).describe().head((l, h, k))
    return paths, components


@torch.no_grad()
def path_patch(model: nn.Module, encoded: EncodedProbe, paths, batch_size: int = 32, max_rows: int = 256,
               baseline: ProbeScore | None = None, via: str = "direct", components=("k", "v"),
               positions: str = "all", values: list[list[int]] | None = None, outcomes: bool = False):
    """One row per ``(sender, receiver)`` of ``paths`` (each ``(layer, head, kind)``, sender's layer
    below the receiver's): KV ``accuracy``, ``answer_logprob`` and ``margin`` with the sender's output
    removed from the receiver's ``components`` at ``positions`` only, the prompts it changes
    (``discordant``), and the unpatched model's (``baseline_*``). ``values``: per example, its value
    tokens' positions (:func:`value_positions`; needed for ``positions="values"``). ``outcomes``:
    ``(rows, Outcomes)``, per prompt."""
    paths, components = _checked_paths(model, paths, via, components, positions, values)
    senders = sorted({s for s, _ in paths})
    by_layer: dict[int, list[int]] = defaultdict(list)
    for i, (_, r) in enumerate(paths):
        by_layer[r[0]].append(i)

    def prepare(b, inputs):  # what to take out of each receiver layer's input per sender, (B, T, d); the mask
        mask = _position_mask(b, b.input_ids.shape[1], positions, values)
        if via == "direct":
            return {(sd, lr): d for sd, d in _sender_outputs(model, senders, b).items() for lr in by_layer}, mask
        deltas = {}
        for sd in senders:
            with ablate_heads(model, [sd]):
                without = capture_layer_inputs(model, sorted(by_layer), **b.model_inputs(model), use_cache=False)
            deltas.update({(sd, lr): inputs[lr] - without[lr] for lr in by_layer})
        return deltas, mask

    def intervene(stack, layer, chunk, x, state):
        deltas, mask = state
        delta = torch.cat([deltas[(paths[i][0], layer)] for i in chunk])  # (A*B, T, d)
        A = len(chunk)
        stack.enter_context(_patched_heads(model, layer, x - delta, [paths[i][1][1] for i in chunk], x.shape[0] // A,
                                           components, None if mask is None else mask.repeat(A, 1)))

    baseline = score(model, encoded, batch_size=batch_size) if baseline is None else baseline
    record, finish = recorder(len(paths), encoded, baseline) if outcomes else (None, None)
    totals, base_row = repeated_forward_scores(model, encoded, by_layer, len(paths), intervene, prepare,
                                               batch_size=batch_size, max_rows=max_rows, baseline=baseline,
                                               record=record)
    n = len(encoded)
    rows = []
    for (s, r), t in zip(paths, totals):
        mixer, _ = _attention(model, r[0], r[2])
        rows.append(dict(sender=set_name([s]), receiver=set_name([r]), target="head", via=via,
                         components="".join(components), positions=positions, **item_means(t, n),
                         kv_group=mixer.kv_group or 1, n_examples=n, **base_row))
    rows = pd.DataFrame(rows)
    return (rows, finish()) if outcomes else rows


@torch.no_grad()
def path_to_logits(model: nn.Module, encoded: EncodedProbe, senders, batch_size: int = 32, max_rows: int = 256,
                   baseline: ProbeScore | None = None, outcomes: bool = False):
    """One row per sender: KV scores with its own write ``W_O z_g`` removed only from the stream the
    final norm reads (the direct path to the logits; every later layer reads it unchanged).
    ``target`` is ``logits`` in every row."""
    senders = [tuple(s) for s in senders]
    for s in senders:
        _attention(model, s[0], s[2])
        adapter_for(model).describe().head(s)
    norm = getattr(getattr(model, "base_model", model), "norm", None)
    if not isinstance(norm, nn.Module):
        raise InterventionError("path to the logits: the model has no final norm (base_model.norm) to patch before")
    last = len(adapter_for(model).layers()) - 1

    def prepare(b, inputs):
        return _sender_outputs(model, senders, b)

    def intervene(stack, layer, chunk, x, writes):
        delta = torch.cat([writes[senders[i]] for i in chunk])  # (A*B, T, d)
        stack.callback(norm.register_forward_pre_hook(lambda m, args: (args[0] - delta.to(args[0].dtype),)
                                                      + tuple(args[1:])).remove)

    baseline = score(model, encoded, batch_size=batch_size) if baseline is None else baseline
    record, finish = recorder(len(senders), encoded, baseline) if outcomes else (None, None)
    totals, base_row = repeated_forward_scores(model, encoded, {last: list(range(len(senders)))}, len(senders),
                                               intervene, prepare, batch_size=batch_size, max_rows=max_rows,
                                               baseline=baseline, record=record)
    n = len(encoded)
    rows = pd.DataFrame([dict(sender=set_name([s]), receiver="logits", target="logits", via="direct",
                              components="-", positions="all", **item_means(t, n),
                              kv_group=1, n_examples=n, **base_row) for s, t in zip(senders, totals)])
    return (rows, finish()) if outcomes else rows


def _sender_outputs(model, senders, batch) -> dict:
    """Each sender's write into the residual stream, ``W_O[:, g] z_g`` (B, T, d_model), from one forward."""
    got: dict = {}
    with ExitStack() as stack:
        for s in senders:
            mixer, _ = _attention(model, s[0], s[2])
            D, h = mixer.head_dim, s[1]

            def grab(module, args, s=s, D=D, h=h):
                z = args[0][..., h * D:(h + 1) * D]
                got[s] = z @ module.weight[:, h * D:(h + 1) * D].T.to(z.dtype)

            stack.callback(mixer.out_proj.register_forward_pre_hook(grab).remove)
        model(**batch.model_inputs(model), use_cache=False)
    return got


def _patched_heads(model, layer: int, patched_x: torch.Tensor, receivers: list[int], B: int, components,
                   mask: torch.Tensor | None):
    """While active, copy i (rows i*B..(i+1)*B) of layer ``layer``'s q/k/v projections (``components``)
    has receiver head ``receivers[i]``'s slice (its K/V head's for k and v) recomputed from
    ``input_layernorm(patched_x)``, at the positions of ``mask`` (A*B, T) (every position: None)."""
    mixer, block = _attention(model, layer, "attention")
    attn, D = mixer.module, mixer.head_dim
    normed = block.input_layernorm(patched_x)
    stack = ExitStack()
    for c in components:
        proj = getattr(attn, f"{c}_proj")
        heads = [mixer.kv_head_of(h) if (c != "q" and mixer.kv_heads) else h for h in receivers]
        new = proj(normed)

        def swap(module, args, out, new=new, heads=heads):
            if out.shape != new.shape:
                raise InterventionError(f"path patching: projection of shape {tuple(out.shape)}, expected "
                                        f"{tuple(new.shape)}")
            out = out.clone()
            for i, j in enumerate(heads):
                rows, cols = slice(i * B, (i + 1) * B), slice(j * D, (j + 1) * D)
                if mask is None:
                    out[rows, :, cols] = new[rows, :, cols]
                else:
                    out[rows, :, cols] = torch.where(mask[rows, :, None], new[rows, :, cols], out[rows, :, cols])
            return out

        stack.callback(proj.register_forward_hook(swap).remove)
    return stack
