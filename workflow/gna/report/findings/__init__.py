"""``figures/findings.md``: for each claim of the paper, whether this run shows it, with numbers.

Each check reads the tables the other report rules wrote and returns rows of (claim, model,
verdict, evidence). Verdicts: ``holds``, ``does not hold``, ``partly``, ``n/a`` (the run lacks
what the claim needs, or the unmodified model is near chance on the claim's task: within
``common.NEAR_CHANCE`` of ``common.CHANCE``, the one chance convention). At micro scale the
comparison is of shape, not of values. Where a number rests on random draws (random heads, probe
sets) the tables carry min-max spreads, and a verdict asks for an effect beyond them.

Settings (``make``'s ``settings``; the findings rule passes the config's): ``mmlu_chance``,
``tolerance`` (layer_pruning: MMLU kept within it), ``collapse`` (share of the above-chance MMLU
lost for a collapse), ``knowledge_tolerance`` (knowledge kept within it), accuracies in 0-1.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common import write_text
from .heads import head_keeping, kv_pairs, redundancy, topk
from .hybrids import distillation, hybrid_attention, layer_swap, row_sweep, ssm_masking
from .inference_memory import memory
from .pruning import gradual, individual
from .verdicts import with_settings
from ...questions.answers import open_questions


def make(figures_dir, out_md, settings: dict | None = None, rankings: dict | None = None) -> pd.DataFrame:
    """Every check on the tables in ``figures_dir``; ``settings``: see the package docstring;
    ``rankings``: {model: the scan's ranking csv}, for the redundancy check."""
    fig = Path(figures_dir)
    st = with_settings(settings)
    rows = (gradual(fig, st) + individual(fig, st) + head_keeping(fig, st) + kv_pairs(fig)
            + topk(fig, "topk_removal.csv", "Slides: removing the top-k KV heads hurts retrieval-heavy tasks more "
                   "than removing k random heads, knowledge holds", ["mmlu", "gsm8k", "swde", "bbh"], ["knowledge"], st)
            + topk(fig, "arc_chat.csv", "ARC-C chat (letter) falls under top-k removal, regular ARC-C holds",
                   ["arc_challenge_chat"], ["arc_challenge"], st)
            + redundancy(fig, rankings=rankings) + memory(fig)
            + ssm_masking(fig, st) + hybrid_attention(fig, st) + row_sweep(fig, st) + layer_swap(fig)
            + distillation(fig) + open_questions(fig))
    df = pd.DataFrame(rows, columns=["claim", "model", "verdict", "evidence"])
    lines = ["# Findings: which of the paper's claims this run shows", "",
             "Computed from the tables in this folder by `gna.report.findings`; thresholds are in its source.", ""]
    for claim, sub in df.groupby("claim", sort=False):
        lines.append(f"## {claim}")
        lines += [f"- **{r.model}**: {r.verdict}. {r.evidence}" for r in sub.itertuples()]
        lines.append("")
    write_text("\n".join(lines), out_md)
    return df
