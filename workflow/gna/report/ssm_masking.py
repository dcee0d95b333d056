"""The SSM masking table and figure (slides, section 5): the SSM's top G&A heads masked.

One row per (model, condition): MMLU-format and mean knowledge accuracy with the heads unmasked
(``none``), zeroed (``full``), or keeping only their Gather-and-Aggregate pattern (``pattern``),
one panel per model with the four-choice chance line of :mod:`gna.report.common`.

The tables-and-figures layer of the experiment ``ssm_masking``. One concept at three layers:
:mod:`gna.experiments.ssm_masking` runs it, this module reports it, :mod:`gna.report.findings.ssm_masking`
judges it.
"""
from __future__ import annotations

import pandas as pd

from .common import chance_of, model_panels, read_csvs, save_figure, write_table


def masking_table(df: pd.DataFrame, mmlu_tasks: list[str]) -> pd.DataFrame:
    """One row per (model, condition): MMLU-format and mean knowledge accuracy (percent)."""
    rows = []
    for (model, cond), sub in df.groupby(["model", "condition"], sort=False):
        mm = sub[sub.task.isin(mmlu_tasks)].value.mean() * 100
        kn = sub[~sub.task.isin(mmlu_tasks)].value.mean() * 100
        rows.append(dict(model=model, condition=cond, heads=sub["heads"].iloc[0], selection=sub.selection.iloc[0],
                         mmlu=mm, knowledge=kn,
                         **{f"acc_{t}": v * 100 for t, v in zip(sub.task, sub.value)}))
    out = pd.DataFrame(rows)
    order = {"none": 0, "full": 1, "pattern": 2}
    return out.sort_values(["model", "condition"], key=lambda s: s.map(order) if s.name == "condition" else s,
                           kind="stable").reset_index(drop=True)


def masking_figure(table: pd.DataFrame):
    fig, panels = model_panels(table, "Masking the SSM's top G&A heads (none / fully / all but the G&A pattern)")
    for model, sub, ax in panels:
        x = range(len(sub))
        ax.bar([i - 0.2 for i in x], sub.mmlu, 0.4, label="MMLU-format", color="tab:red")
        ax.bar([i + 0.2 for i in x], sub.knowledge, 0.4, label="knowledge", color="tab:blue")
        ax.axhline(100 * chance_of("mmlu"), ls=":", c="gray", label="chance (4 choices)")
        ax.set_xticks(list(x), list(sub.condition))
        ax.set(title=f"{model}\n{sub.heads.iloc[0]}", ylabel="accuracy (%)", ylim=(0, 102))
        ax.title.set_fontsize(8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def make_masking(paths, mmlu_tasks, png, pdf, csv, md) -> pd.DataFrame:
    table = masking_table(read_csvs(paths), mmlu_tasks)
    save_figure(masking_figure(table), png, pdf)
    fallback = sorted(set(table.model[table.selection != "classified"]))
    write_table(table, csv, md, title="Masking the SSM's G&A heads (slides, section 5)",
                note="Accuracy in percent (lm-eval's `acc`, scored with gna.probes.scoring). `none`: the model; "
                     "`full`: the Gather and Aggregate heads zeroed; `pattern`: the Gather head keeps only the entries "
                     "inside each answer-choice line, the Aggregate head only the final position's entries onto each "
                     "choice's closing newline (knowledge prompts have no choice lines: masked fully). Published "
                     "(slides): full -> MMLU near chance, pattern -> MMLU stays high; exact numbers unknown."
                     + (f" Heads of {', '.join(fallback)}: no SSM head classified Gather/Aggregate by the scan; the "
                        "top-ranked SSM head of the earliest/latest layer among its top heads was used." if fallback
                        else ""))
    return table
