"""G&A heatmaps: the token-mixing pattern of each model's top Gather and Aggregate head on
one KV prompt, attention and SSM heads side by side (paper Figs. 5-6).

The tables-and-figures layer of the experiment ``heatmaps``, its one module: the heads are the scan's,
the patterns :mod:`gna.patterns.mixing`'s, and it judges no claim.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import torch

from ..experiments.head_selection import top_role_head
from ..patterns.mixing import mixing_matrices
from ..models import describe
from .common import save_figure
from .explorer import display_matrix

ROLES = ("gather", "aggregate")


def head_patterns(model, tokenizer, prompt: str, ga: pd.DataFrame) -> dict[str, tuple[list, torch.Tensor | None]]:
    """``{role: ((layer, head, kind), matrix (T, T) or None)}`` on ``prompt``. SSM matrices by
    absolute value without the diagonal (the D skip term, which mixes nothing), each row scaled
    to sum 1 (as attention's does)."""
    ids = torch.tensor([tokenizer(prompt)["input_ids"]], device=next(model.parameters()).device)
    out = {}
    for role in ROLES:
        head = top_role_head(ga, role)
        if head is None:
            out[role] = (None, None)
            continue
        layer, h, kind = head
        mat = mixing_matrices(model, describe(model).mixer(layer, kind), ids)[0, h].cpu()
        out[role] = (head, display_matrix(mat, kind))
    return out


def figure(patterns: dict[str, dict], tokens: dict[str, list[str]]):
    models = list(patterns)
    fig, axes = plt.subplots(len(models), 2, figsize=(8, 3.8 * len(models)), squeeze=False)
    for row, model in zip(axes, models):
        for ax, role in zip(row, ROLES):
            head, mat = patterns[model][role]
            if mat is None:
                ax.text(0.5, 0.5, f"no {role} head\namong the top heads", ha="center", va="center")
                ax.set_axis_off()
                continue
            image = ax.imshow(mat.numpy(), cmap="viridis", vmin=0)
            weight = "attention weight" if head[2] == "attention" else "|mixing weight|, rows sum to 1"
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.02).set_label(weight, fontsize=6)
            toks = [t.replace("\n", "\\n") for t in tokens[model]]
            if len(toks) <= 48:
                ax.set_xticks(range(len(toks)), toks, rotation=90, fontsize=5)
                ax.set_yticks(range(len(toks)), toks, fontsize=5)
            ax.set_xlabel("key (token read from)", fontsize=7)
            ax.set_ylabel("query (token reading)", fontsize=7)
            ax.set_title(f"{model}: {role} head, layer {head[0]} head {head[1]} ({head[2]})", fontsize=8)
    fig.tight_layout()
    return fig


def make(models: dict, ga_paths: dict[str, str], prompt: str, png, pdf) -> None:
    patterns, tokens = {}, {}
    for name, (model, tok) in models.items():
        patterns[name] = head_patterns(model, tok, prompt, pd.read_csv(ga_paths[name]))
        tokens[name] = tok.convert_ids_to_tokens(tok(prompt)["input_ids"])
    save_figure(figure(patterns, tokens), png, pdf)


def heatmap_rows(role: str, head, matrix, tokens: list[str]) -> list[dict]:
    """Tidy rows of one head's mixing ``matrix (T, T)`` on the prompt: the causal part
    (key_pos <= query_pos; the rest is zero by construction)."""
    layer, h, kind = head
    T = matrix.shape[0]
    return [dict(role=role, layer=layer, head=h, kind=kind, query_pos=t, query_token=tokens[t], key_pos=s,
                 key_token=tokens[s], weight=float(matrix[t, s])) for t in range(T) for s in range(t + 1)]
