"""Head interventions: ablate heads, keep only some heads, per-sample head masks.

All are context managers built on hooks; weights are never touched, and leaving the
context restores the model bit-identically.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Iterable, Iterator, Mapping

import torch
from torch import nn

from ..errors import HeadIndexError, InterventionError
from ..models import adapter_for
from ..models.description import Mixer
from .hooks import check_hookable, rewrite_heads

HeadRef = tuple  # (layer, head) or (layer, head, kind)


def _group(model: nn.Module, heads: Iterable[HeadRef]) -> dict[Mixer, list[int]]:
    """Validate every head first, so nothing runs on a bad index."""
    desc = adapter_for(model).describe()
    grouped: dict[Mixer, list[int]] = {}
    for ref in heads:
        mixer, h = desc.head(tuple(ref))
        grouped.setdefault(mixer, []).append(h)
    return grouped


@contextmanager
def ablate_heads(model: nn.Module, heads: Iterable[HeadRef], mode: str = "zero",
                 means: Mapping[tuple[int, str], torch.Tensor] | None = None) -> Iterator[nn.Module]:
    """Zero (or mean-replace) each head's slice of its mixer's output-projection input.

    ``heads``: ``(layer, head)`` or ``(layer, head, kind)``; ``kind`` is needed only where a
    layer has two mixers (Zamba2 hybrid layers, every Falcon-H1 layer: ``"attention"`` and ``"mamba2"``).
    ``mode="mean"`` needs ``means[(layer, kind)]`` of shape ``(n_heads, head_dim)``, e.g.
    from :func:`collect_head_means`.
    """
    if mode not in ("zero", "mean"):
        raise InterventionError(f"ablation mode {mode!r} is not 'zero' or 'mean'")
    grouped = _group(model, heads)
    check_hookable(model, list(grouped))
    with ExitStack() as stack:
        for mixer, idx in grouped.items():
            index = torch.tensor(sorted(set(idx)))
            if mode == "zero":
                def fn(x, index=index):
                    x = x.clone()
                    x[..., index, :] = 0
                    return x
            else:
                key = (mixer.layer, mixer.kind)
                if means is None or key not in means:
                    raise InterventionError(f"mean ablation needs means[{key}]; have {sorted(means or {})}")
                if tuple(means[key].shape) != (mixer.n_heads, mixer.head_dim):
                    raise InterventionError(f"means[{key}] has shape {tuple(means[key].shape)}, "
                                            f"expected {(mixer.n_heads, mixer.head_dim)}")

                def fn(x, index=index, mu=means[key]):
                    x = x.clone()
                    x[..., index, :] = mu[index].to(x)
                    return x
            stack.enter_context(rewrite_heads(mixer, fn))
        yield model


@contextmanager
def keep_heads(model: nn.Module, layer: int, heads: Iterable[int], kind: str | None = None
               ) -> Iterator[nn.Module]:
    """Ablate every head of one layer's mixer except ``heads`` (Table 1's head keeping)."""
    desc = adapter_for(model).describe()
    mixer = desc.mixer(layer, kind)
    keep = {desc.head((layer, h, mixer.kind))[1] for h in heads}
    with ablate_heads(model, [(layer, h, mixer.kind) for h in range(mixer.n_heads) if h not in keep]):
        yield model


@contextmanager
def head_mask(model: nn.Module, layer: int, mask: torch.Tensor, kind: str | None = None
              ) -> Iterator[nn.Module]:
    """Multiply each sample's heads by ``mask`` of shape ``(batch, n_heads)``.

    Row ``b`` of the batch sees its own set of ablated heads: the scan evaluates all of a
    layer's single-head ablations in one batch this way. Multiplying by 1.0 is exact, so an
    all-ones row reproduces the unablated model.
    """
    mixer = adapter_for(model).describe().mixer(layer, kind)
    if mask.ndim != 2 or mask.shape[1] != mixer.n_heads:
        raise HeadIndexError(f"head mask for layer {layer} must be (batch, {mixer.n_heads}); "
                             f"got {tuple(mask.shape)}")
    check_hookable(model, [mixer])

    def fn(x):
        if x.shape[0] != mask.shape[0]:
            raise InterventionError(f"head mask has {mask.shape[0]} rows but the batch has {x.shape[0]}")
        return x * mask.to(x).view(mask.shape[0], *([1] * (x.ndim - 3)), mixer.n_heads, 1)

    with rewrite_heads(mixer, fn):
        yield model


@torch.no_grad()
def head_token_sum(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Sum over the real tokens of head outputs x (B, T, H, d): (H, d) float64 on x's device (the
    mask keep (B, T) is brought there: on a GPU the activations never meet a CPU accumulator)."""
    w = keep.to(device=x.device, dtype=x.dtype).view(*keep.shape, 1, 1)
    return (x * w).sum(dim=(0, 1)).double()


@torch.no_grad()
def collect_head_means(model: nn.Module, batches: Iterable[dict]) -> dict[tuple[int, str], torch.Tensor]:
    """Mean of every head's output over all real tokens of ``batches`` (for mean ablation).

    Each batch is a dict of model inputs with an ``attention_mask`` marking real tokens. The means
    (H, d) float32 live where the heads' outputs do.
    """
    desc = adapter_for(model).describe()
    sums: dict[tuple[int, str], torch.Tensor] = {}
    count = [0]
    current_mask: list[torch.Tensor] = []

    def make(m: Mixer):
        def fn(x):
            part, key = head_token_sum(x, current_mask[0]), (m.layer, m.kind)
            sums[key] = part if key not in sums else sums[key] + part
            return x
        return fn

    with ExitStack() as stack:
        for m in desc.mixers:
            stack.enter_context(rewrite_heads(m, make(m)))
        for batch in batches:
            current_mask[:] = [batch["attention_mask"]]
            count[0] += int(batch["attention_mask"].sum())
            model(**batch)
    if count[0] == 0:
        raise InterventionError("collect_head_means got no tokens")
    device = next(model.parameters()).device
    return {(m.layer, m.kind): (sums[(m.layer, m.kind)] / count[0]).float() if (m.layer, m.kind) in sums
            else torch.zeros(m.n_heads, m.head_dim, device=device) for m in desc.mixers}
