"""The row-mask sweep's table and figure: MMLU per masked position set of the prompt.

One row per (model, head set, condition): MMLU accuracy (percent, the mean over the MMLU tasks)
with the head set's output rows masked at that position set (``none``: unmasked), and ``drop``,
the points lost against ``none``. The figure: one panel per model, bars per position set, one
colour per head set, the unmasked model dashed and the four-choice chance dotted.

The tables-and-figures layer of the experiment ``row_sweep``. One concept at three layers:
:mod:`gna.experiments.row_sweep` runs it, this module reports it, :mod:`gna.report.findings.row_sweep`
judges it.
"""
from __future__ import annotations

import pandas as pd

from .common import chance_of, model_panels, read_csvs, save_figure, write_table

ORDER = ("none", "answer", "option_values", "option_letters", "option_closers", "question", "all_but_answer")


def sweep_table(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (model, head_set, cond), sub in df.groupby(["model", "head_set", "condition"], sort=False):
        rows.append(dict(model=model, head_set=head_set, heads=sub["heads"].iloc[0], condition=cond,
                         mmlu=sub.value.mean() * 100, n=int(sub.n.sum())))
    out = pd.DataFrame(rows)
    base = out[out.condition == "none"].set_index(["model", "head_set"]).mmlu
    out["drop"] = [base.get((m, h)) - v for m, h, v in zip(out.model, out.head_set, out.mmlu)]
    rank = {c: i for i, c in enumerate(ORDER)}
    return out.sort_values(["model", "head_set", "condition"], key=lambda s: s.map(rank) if s.name == "condition"
                           else s, kind="stable").reset_index(drop=True)


def sweep_figure(table: pd.DataFrame):
    fig, panels = model_panels(table, "Where the model aggregates: MMLU with a head set's rows masked at one "
                                      "position set of the prompt")
    fig.set_size_inches(6.5 * len(panels), 3.6)   # six position sets and a legend beside them
    for model, sub, ax in panels:
        sets = list(dict.fromkeys(sub.head_set))
        conds = [c for c in ORDER if c in set(sub.condition) and c != "none"]
        width = 0.8 / len(sets)
        for j, (hs, colour) in enumerate(zip(sets, ("tab:red", "tab:green", "tab:purple", "tab:orange"))):
            s = sub[sub.head_set == hs].set_index("condition")
            ax.bar([i - 0.4 + width * (j + 0.5) for i in range(len(conds))], s.mmlu.reindex(conds), width,
                   color=colour, label=f"{hs} heads masked")
        base = sub[sub.condition == "none"].mmlu.unique()   # the same model: one line unless runs differ
        for j, v in enumerate(base):
            ax.axhline(v, ls="--", c="k", lw=1, label="unmasked" if len(base) == 1 else f"unmasked (run {j + 1})")
        ax.axhline(100 * chance_of("mmlu"), ls=":", c="gray", label="chance (4 choices)")
        ax.set_xticks(range(len(conds)), [c.replace("_", "\n") for c in conds], fontsize=7)
        ax.set(title=model, ylabel="MMLU (%)", ylim=(0, 102), xlabel="masked position set")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def make_row_sweep(paths, png, pdf, csv, md) -> pd.DataFrame:
    table = sweep_table(read_csvs(paths))
    save_figure(sweep_figure(table), png, pdf)
    write_table(table, csv, md, title="Where the model aggregates: row-mask sweep over the MMLU prompt",
                note="MMLU accuracy in percent (lm-eval's `acc`, scored with gna.probes.scoring) with the head set's "
                     "output rows zeroed at one named set of prompt positions (gna.experiments.row_sweep); `drop`: "
                     "points lost against `none` (unmasked). `answer` is the official Zamba2 mask (the last row); "
                     "`option_values` / `option_letters` / `option_closers`: every option's value, letter, closing "
                     "newline; `question`: the tokens before the options; `all_but_answer`: every prompt position "
                     "but the answer's. The set whose masking costs most is where those heads aggregate.")
    return table
