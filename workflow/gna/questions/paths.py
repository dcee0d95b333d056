"""Which Gather feeds which Aggregate: path patching of attention heads.

Remove Gather head g's output (layer l_g) only from what Aggregate head a (layer l_a > l_g) reads
through its keys and values, and from nothing else, then measure KV retrieval. g writes
``delta_g = W_O[:, g] z_g`` into the residual stream (``z_g``: g's slice of its ``o_proj`` input,
which the scan's ablation zeroes); the stream entering layer l_a holds it directly. So a's key and
value projections are recomputed on ``norm(x_{l_a} - delta_g)`` (the layer's own ``input_layernorm``),
while its query, every other head and every later layer read the unpatched stream: the direct
path g -> a (K, V) removed, as zero ablation removes g everywhere. ``via="all"`` removes every path
from g into a's keys and values instead: they read the stream as it is with g ablated (g's write and
what the MLPs and heads between make of it), the rest of the model the unablated stream.

Expressible where a head's input is the layer's normed residual through ``k_proj`` / ``v_proj``:
attention decoders (Llama, Qwen2, Mistral, ...). With grouped K/V (GQA) a's K/V head is shared by
its group of query heads, so the patch reaches that group (``kv_group`` in the rows says how many).
Not expressible, and refused with the reason: Mamba / Mamba-2 heads (a head's own input, its x, B,
C and dt, comes out of one ``in_proj`` and a causal convolution shared across heads, with no module
boundary per head) and Zamba2's shared attention (its input is the residual concatenated with the
embeddings, read by one block at several depths).
"""
from __future__ import annotations

from collections import defaultdict
from contextlib import ExitStack

import pandas as pd
import torch
from torch import nn

from ..errors import HeadIndexError, InterventionError
from ..interventions import ablate_heads, capture_layer_inputs
from ..models import adapter_for
from ..probes.scoring import EncodedProbe, ProbeScore, score
from .head_sets import repeated_forward_scores, set_name


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
    if not all(hasattr(attn, n) for n in ("k_proj", "v_proj")) or not hasattr(block, "input_layernorm"):
        raise InterventionError(f"path patching: layer {layer}'s attention has no k_proj / v_proj behind an "
                                "input_layernorm")
    return mixer, block


@torch.no_grad()
def path_patch(model: nn.Module, encoded: EncodedProbe, paths, batch_size: int = 32, max_rows: int = 256,
               baseline: ProbeScore | None = None, via: str = "direct") -> pd.DataFrame:
    """One row per ``(sender, receiver)`` of ``paths`` (each ``(layer, head, kind)``, sender's layer
    below the receiver's): KV ``accuracy``, ``answer_logprob`` and ``margin`` with the sender's output
    removed from the receiver's keys and values only, and the unpatched model's (``baseline_*``).

    ``via="direct"``: the sender's own write ``W_O z_g`` taken out of the receiver's input; ``"all"``:
    the receiver's K/V read the stream as it is with the sender ablated (the direct write and
    whatever the layers between make of it), everything else the unablated stream."""
    if via not in ("direct", "all"):
        raise InterventionError(f"path patching via {via!r}: expected 'direct' or 'all'")
    paths = [(tuple(s), tuple(r)) for s, r in paths]
    for (ls, hs, ks), (lr, hr, kr) in paths:
        if ls >= lr:
            raise HeadIndexError(f"path {set_name([(ls, hs, ks)])} -> {set_name([(lr, hr, kr)])}: the sender must "
                                 "sit in a lower layer than the receiver")
        _attention(model, ls, ks)
        _attention(model, lr, kr)
        for l, h, k in ((ls, hs, ks), (lr, hr, kr)):
            adapter_for(model).describe().head((l, h, k))
    senders = sorted({s for s, _ in paths})
    by_layer: dict[int, list[int]] = defaultdict(list)
    for i, (_, r) in enumerate(paths):
        by_layer[r[0]].append(i)

    def prepare(b, inputs):  # {(sender, receiver layer): what to take out of that layer's input, (B, T, d)}
        if via == "direct":
            return {(sd, lr): d for sd, d in _sender_outputs(model, senders, b).items() for lr in by_layer}
        deltas = {}
        for sd in senders:
            with ablate_heads(model, [sd]):
                without = capture_layer_inputs(model, sorted(by_layer), input_ids=b.input_ids,
                                               attention_mask=b.attention_mask, use_cache=False)
            deltas.update({(sd, lr): inputs[lr] - without[lr] for lr in by_layer})
        return deltas

    def intervene(stack, deltas, layer, chunk, x):
        delta = torch.cat([deltas[(paths[i][0], layer)] for i in chunk])  # (A*B, T, d)
        stack.enter_context(_patched_kv(model, layer, x - delta, [_kv_head(model, paths[i][1]) for i in chunk],
                                        x.shape[0] // len(chunk)))

    totals, base_row = repeated_forward_scores(model, encoded, by_layer, len(paths), intervene, prepare,
                                               batch_size=batch_size, max_rows=max_rows, baseline=baseline)
    n = len(encoded)
    rows = []
    for (s, r), t in zip(paths, totals):
        mixer, _ = _attention(model, r[0], r[2])
        rows.append(dict(sender=set_name([s]), receiver=set_name([r]), via=via, accuracy=t[0].item() / n,
                         answer_logprob=t[1].item() / n, margin=t[2].item() / n, kv_group=mixer.kv_group or 1,
                         n_examples=n, **base_row))
    return pd.DataFrame(rows)


def _kv_head(model, head) -> int:
    mixer, _ = _attention(model, head[0], head[2])
    return mixer.kv_head_of(head[1]) if mixer.kv_heads else head[1]


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
        model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    return got


def _patched_kv(model, layer: int, patched_x: torch.Tensor, kv_heads: list[int], B: int):
    """While active, copy i (rows i*B..(i+1)*B) of layer ``layer``'s k_proj / v_proj outputs has its
    K/V head ``kv_heads[i]`` recomputed from ``input_layernorm(patched_x)``."""
    mixer, block = _attention(model, layer, "attention")
    attn, D = mixer.module, mixer.head_dim
    normed = block.input_layernorm(patched_x)
    stack = ExitStack()
    for proj in (attn.k_proj, attn.v_proj):
        new = proj(normed)

        def swap(module, args, out, new=new):
            if out.shape != new.shape:
                raise InterventionError(f"path patching: k/v projection of shape {tuple(out.shape)}, expected "
                                        f"{tuple(new.shape)}")
            out = out.clone()
            for i, j in enumerate(kv_heads):
                out[i * B:(i + 1) * B, :, j * D:(j + 1) * D] = new[i * B:(i + 1) * B, :, j * D:(j + 1) * D]
            return out

        stack.callback(proj.register_forward_hook(swap).remove)
    return stack


def ga_matrix(model: nn.Module, encoded: EncodedProbe, gathers, aggregates, model_name: str = "",
              **batching) -> pd.DataFrame:
    """The G-to-A matrix as rows: every Gather below every Aggregate, the KV drop with that path
    removed (``drop``: the direct path; ``drop_all_paths``: the Aggregate's K/V read the stream as it is
    without the Gather), beside the drops of ablating the Gather and the Aggregate whole (plain ablation)."""
    from .head_sets import ablate_sets

    paths = [(g, a) for g in gathers for a in aggregates if g[0] < a[0]]
    if not paths:
        return pd.DataFrame()
    baseline = score(model, encoded, batch_size=batching.get("batch_size", 32))
    direct = path_patch(model, encoded, paths, baseline=baseline, **batching)
    every = path_patch(model, encoded, paths, baseline=baseline, via="all", **batching)
    whole = ablate_sets(model, encoded, [[h] for h in dict.fromkeys([p for pair in paths for p in pair])],
                        baseline=baseline, **batching).set_index("heads")
    out = direct.drop(columns="via")
    out["drop"] = out.baseline_accuracy - out.accuracy
    out["margin_drop"] = out.baseline_margin - out.margin
    out["drop_all_paths"] = every.baseline_accuracy - every.accuracy
    out["margin_drop_all_paths"] = every.baseline_margin - every.margin
    out["sender_ablated_drop"] = [whole.loc[s, "baseline_accuracy"] - whole.loc[s, "accuracy"] for s in out.sender]
    out["receiver_ablated_drop"] = [whole.loc[r, "baseline_accuracy"] - whole.loc[r, "accuracy"] for r in out.receiver]
    return out.assign(model=model_name)


def top_roles(ga: pd.DataFrame, n_gather: int, n_aggregate: int) -> tuple[list, list]:
    """The top ``n_gather`` heads classified Gather and ``n_aggregate`` classified Aggregate (attention
    heads, in rank order) of the scan's classified top heads (``<model>.ga.csv``)."""
    ga = ga[ga.kind == "attention"].sort_values("rank")
    pick = lambda role, n: [(int(r.layer), int(r["head"]), "attention") for _, r in ga[ga.role == role].head(n).iterrows()]  # noqa: E731
    gathers, aggregates = pick("gather", n_gather), pick("aggregate", n_aggregate)
    if not gathers or not aggregates:
        raise InterventionError(f"path patching needs a Gather and an Aggregate attention head among the classified "
                                f"top heads; found {len(gathers)} Gather, {len(aggregates)} Aggregate")
    return gathers, aggregates
