"""``figures/findings.md``: for each claim of the paper, whether this run shows it, with numbers.

Each check reads the tables the other report rules wrote and returns rows of (claim, model,
verdict, evidence). Verdicts: ``holds``, ``does not hold``, ``partly``, ``n/a`` (the run lacks
what the claim needs). At micro scale the comparison is of shape, not of values.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import hybrid as hybrid_report
from .common import write_text

CHANCE_MMLU = 0.25


def _read(figures: Path, name: str) -> pd.DataFrame | None:
    p = figures / name
    return pd.read_csv(p) if p.is_file() else None


def _verdict(ok: bool, partly: bool = False) -> str:
    return "holds" if ok else ("partly" if partly else "does not hold")


def gradual(fig: Path) -> list[dict]:
    t = _read(fig, "layer_pruning.csv")
    if t is None:
        return []
    rows = []
    for model, sub in t[t.experiment == "gradual"].groupby("model", sort=False):
        sub = sub.reset_index(drop=True)
        full, first = sub.iloc[-1], sub.iloc[0]
        kn_drop, mm_drop = full.knowledge - first.knowledge, full.mmlu - first.mmlu
        ok = mm_drop > kn_drop and first.mmlu <= CHANCE_MMLU + 0.1
        rows.append(dict(claim="Fig. 2: cutting layers from the end, MMLU holds then collapses to chance",
                         model=model, verdict=_verdict(ok, mm_drop > 0.1),
                         evidence=f"MMLU {full.mmlu:.2f} (all layers) -> {first.mmlu:.2f} (layers {first.layers}); "
                                  f"knowledge {full.knowledge:.2f} -> {first.knowledge:.2f}"))
    return rows


def individual(fig: Path, collapse: float = 0.5, knowledge_tolerance: float = 0.05) -> list[dict]:
    """Fig. 3 holds where some layer is critical: its removal loses at least ``collapse`` of the
    minimal model's MMLU above chance while knowledge stays within ``knowledge_tolerance``
    (:func:`gna.experiments.pruning.critical_table`'s rule and defaults)."""
    t = _read(fig, "layer_pruning.csv")
    if t is None:
        return []
    rows = []
    claim = "Fig. 3: removing one critical layer collapses MMLU, knowledge barely moves"
    for model, sub in t[t.experiment != "gradual"].groupby("model", sort=False):
        g = t[(t.experiment == "gradual") & (t.model == model)]
        minimal = str(sub.experiment.iloc[0]).split("(")[1].split(")")[0]   # "minimal (0..N) minus layer"
        base = g[g.layers == minimal].iloc[0]                              # the minimal model, unablated
        above = base.mmlu - CHANCE_MMLU
        if above < 0.1:
            rows.append(dict(claim=claim, model=model, verdict="n/a",
                             evidence=f"the minimal model is near chance on MMLU ({base.mmlu:.2f})"))
            continue
        lost = (base.mmlu - sub.mmlu) / above
        collapsed = sub[lost >= collapse]
        critical = collapsed[collapsed.knowledge >= base.knowledge - knowledge_tolerance]
        if not critical.empty:
            verdict = "holds"
            shown = critical
        else:
            verdict = "partly" if not collapsed.empty else "does not hold"
            shown = collapsed if not collapsed.empty else sub.loc[[sub.mmlu.idxmin()]]
        rows.append(dict(claim=claim, model=model, verdict=verdict,
                         evidence=f"minimal model MMLU {base.mmlu:.2f}, knowledge {base.knowledge:.2f}; "
                                  + "; ".join(f"without {r.layers}: MMLU {r.mmlu:.2f}, knowledge {r.knowledge:.2f}"
                                              for r in shown.itertuples())
                                  + ("" if not critical.empty else
                                     " (no layer collapses MMLU with knowledge kept: no critical layer)")))
    return rows


def head_keeping(fig: Path) -> list[dict]:
    t = _read(fig, "head_keeping.csv")
    if t is None:
        return []
    rows = []
    claim = "Table 1: the two G&A heads alone keep MMLU; without either, chance; knowledge flat"
    for (model, source), sub in t.groupby(["model", "source"], sort=False):
        s = sub.set_index("condition")
        if "mmlu" not in s or s["mmlu"].isna().all():
            rows.append(dict(claim=claim, model=f"{model} ({source} heads)", verdict="n/a",
                             evidence=str(s["note"].dropna().iloc[0]) if "note" in s else "not run"))
            continue
        both, one = s.loc["both", "mmlu"], max(s.loc["gather_only", "mmlu"], s.loc["aggregate_only", "mmlu"])
        ok = both - one >= 20 and one <= 100 * CHANCE_MMLU + 10
        kn = s["knowledge"]
        rows.append(dict(claim=claim, model=f"{model} ({source} heads {s.iloc[0].gather} + {s.iloc[0].aggregate})",
                         verdict=_verdict(ok, both - one >= 10),
                         evidence=f"MMLU both {both:.1f}, gather only {s.loc['gather_only', 'mmlu']:.1f}, aggregate "
                                  f"only {s.loc['aggregate_only', 'mmlu']:.1f}, neither {s.loc['neither', 'mmlu']:.1f}; "
                                  f"knowledge {kn.min():.1f}-{kn.max():.1f} (paper: 66.3 / 25.6 / 24.4 / 25.6)"))
    return rows


def kv_pairs(fig: Path) -> list[dict]:
    t = _read(fig, "kv_pairs.csv")
    if t is None:
        return []
    rows = []
    for model, sub in t.groupby("model", sort=False):
        full = sub[sub.condition == "full"].set_index("n_pairs").accuracy
        drops = {}
        for cond in ("no_gather", "no_aggregate"):
            c = sub[sub.condition == cond]
            if c.empty or c.accuracy.isna().all():
                continue
            d = full - c.set_index("n_pairs").accuracy
            drops[cond] = (d.iloc[0], d.iloc[-1])
        if "no_aggregate" not in drops:
            rows.append(dict(claim="Fig. 4: without the Aggregate head, KV accuracy falls more as pairs grow",
                             model=model, verdict="n/a", evidence="no head classified Aggregate among the top heads"))
            continue
        a0, a1 = drops["no_aggregate"]
        ok = a1 > a0 + 0.05
        g = drops.get("no_gather")
        rows.append(dict(claim="Fig. 4: without the Aggregate head, KV accuracy falls more as pairs grow",
                         model=model, verdict=_verdict(ok, a1 > a0),
                         evidence=f"drop without Aggregate {a0:.2f} at {full.index[0]} pairs -> {a1:.2f} at "
                                  f"{full.index[-1]}" + (f"; without Gather {g[0]:.2f} -> {g[1]:.2f}" if g else "")))
    return rows


def topk(fig: Path, name: str, claim: str, retrieval: list[str], knowledge: list[str]) -> list[dict]:
    t = _read(fig, name)
    if t is None:
        return []
    rows = []
    for model, sub in t.groupby("model", sort=False):
        sub = sub.sort_values("k")
        lo, hi = sub.iloc[0], sub.iloc[-1]
        r = [c for c in retrieval if c in sub]
        k = [c for c in knowledge if c in sub]
        if not r or not k:
            continue
        r_drop = sum(lo[c] - hi[c] for c in r) / len(r)
        k_drop = sum(lo[c] - hi[c] for c in k) / len(k)
        ok = r_drop > max(2 * k_drop, 5)
        rows.append(dict(claim=claim, model=model, verdict=_verdict(ok, r_drop > k_drop),
                         evidence=f"k {int(lo.k)} -> {int(hi.k)}: " + ", ".join(f"{c} {lo[c]:.1f} -> {hi[c]:.1f}"
                                                                             for c in r + k)))
    return rows


def redundancy(fig: Path) -> list[dict]:
    t = _read(fig, "head_ranking.csv")
    if t is None:
        return []
    top = t[t["rank"] == 1].set_index("model")
    kinds = t.groupby("model").kind.agg(lambda k: "attention" if set(k) == {"attention"} else
                                        ("hybrid" if "attention" in set(k) else "ssm"))
    att = [m for m in top.index if kinds[m] == "attention"]
    ssm = [m for m in top.index if kinds[m] == "ssm"]
    if not att or not ssm:
        return []
    a, s = max(top.loc[att, "drop"]), max(top.loc[ssm, "drop"])
    return [dict(claim="SSM G&A is more redundant: a single SSM head matters less than the transformer's top head",
                 model=", ".join(att + ssm), verdict=_verdict(s < a),
                 evidence="largest single-head KV drop: " + ", ".join(f"{m} {top.loc[m, 'drop']:.2f}" for m in att + ssm))]


def memory(fig: Path) -> list[dict]:
    t = _read(fig, "inference_memory.csv")
    if t is None:
        return []
    known = t[t.model != "hybrid-mohawk"]
    ok = (known["diff"].abs() < 1e-9).all()
    return [dict(claim="Inference memory formula reproduces the published table", model="(formula)",
                 verdict=_verdict(ok), evidence=f"{len(known)} of {len(known)} cells equal at the published precision"
                 if ok else f"differences: {known['diff'].tolist()}")]


def make(figures_dir, out_md) -> pd.DataFrame:
    fig = Path(figures_dir)
    rows = (gradual(fig) + individual(fig) + head_keeping(fig) + kv_pairs(fig)
            + topk(fig, "topk_removal.csv", "Slides: removing the top-k KV heads hurts retrieval-heavy tasks, "
                   "not knowledge", ["mmlu", "gsm8k", "swde", "bbh"], ["knowledge"])
            + topk(fig, "arc_chat.csv", "ARC-C chat (letter) falls under top-k removal, regular ARC-C holds",
                   ["arc_challenge_chat"], ["arc_challenge"])
            + redundancy(fig) + memory(fig) + hybrid_report.findings_rows(fig))
    df = pd.DataFrame(rows, columns=["claim", "model", "verdict", "evidence"])
    lines = ["# Findings: which of the paper's claims this run shows", "",
             "Computed from the tables in this folder by `gna.report.findings`; thresholds are in its source.", ""]
    for claim, sub in df.groupby("claim", sort=False):
        lines.append(f"## {claim}")
        lines += [f"- **{r.model}**: {r.verdict}. {r.evidence}" for r in sub.itertuples()]
        lines.append("")
    write_text("\n".join(lines), out_md)
    return df
