"""Layer pruning (Figs. 2-3): where retrieval collapses, and which layers it rests on.

The computation layer of the experiment ``layer_pruning`` (its critical layers are where
``head_keeping`` keeps heads). One concept at three layers, one module each: this one runs the pruning;
:mod:`gna.report.pruning` draws its figures; :mod:`gna.report.findings.pruning` judges the paper's claims
on them.

The minimal depth and the critical layers are chosen on each question's answer (the jobs'
``*.answers.csv``, :mod:`gna.evaluation.paired`), so that a choice does not turn on the noise of a
sample: a depth is cut only where its drop is beyond the tolerance and beyond noise, a layer is
critical only where its MMLU loss is beyond noise and its knowledge drop is shown to be small.
"""
from __future__ import annotations

import pandas as pd

from ..errors import GnaError
from ..evaluation.paired import Paired, pooled

ALPHA = 0.05
"""The level of the critical layers' McNemar test (Holm-corrected over the layers tested)."""


class MissingAnswersError(GnaError, ValueError):
    """A choice that rests on each question's answer, asked of results that kept none."""


def metric_by(df: pd.DataFrame, key: str, tasks: list[str], metric: str = "acc") -> pd.Series:
    """Mean ``metric`` over ``tasks`` for each value of column ``key``."""
    sel = df[df.task.isin(tasks) & (df.metric == metric)]
    return sel.groupby(key)["value"].mean().sort_index()


def _answered(table: pd.DataFrame | None, tasks, what: str) -> pd.DataFrame:
    """``table`` where it answers every one of ``tasks``; else one line naming what is missing."""
    have = set() if table is None or table.empty else set(table.task)
    missing = [t for t in tasks if t not in have]
    if missing:
        raise MissingAnswersError(f"{what} has no per-question answers for {', '.join(missing)} (a result "
                                  "written before evaluations kept them): rerun it; the paired test needs them")
    return table


def depth_table(gradual: pd.DataFrame, mmlu_tasks: list[str], tolerance: float,
                answers: dict[int, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Fig. 2's depths against the full model (the deepest): one row per depth with its MMLU, the
    drop from the full model's, and whether the depth *holds*.

    With ``answers`` (depth -> that depth's answers, :mod:`gna.evaluation.items`), the drop carries its
    paired 95% interval (Newcombe, over the MMLU tasks' questions pooled) and a depth is given up only
    where its loss is both material and real: its point estimate beyond ``tolerance`` *and* its
    interval wholly above zero. A drop over the tolerance that the sample cannot tell from none keeps
    the depth (one answer does not tip it), and a significant loss beyond the tolerance cuts it, as the
    paper's minimal model keeps the full model's MMLU (Llama-3.1-8B: 66.3 at layers 0..17). Requiring
    the interval to clear the tolerance itself would keep, at 150 questions, a real loss of twice it.
    Without answers (an older result) a depth holds where its point estimate is within ``tolerance``
    (``test`` ``point``). Columns: depth, mmlu, drop, low, high, holds, test."""
    mmlu = metric_by(gradual, "depth", mmlu_tasks)
    full = int(mmlu.index.max())
    rows = []
    for d in mmlu.index:
        drop = float(mmlu[full] - mmlu[d])
        if answers is None:
            rows.append(dict(depth=int(d), mmlu=float(mmlu[d]), drop=drop, low=float("nan"), high=float("nan"),
                             holds=bool(drop <= tolerance), test="point"))
            continue
        first = _answered(answers.get(full), mmlu_tasks, f"the full model (depth {full})")
        second = _answered(answers.get(int(d)), mmlu_tasks, f"depth {int(d)}")
        low, high = pooled(first, second, mmlu_tasks).interval()
        rows.append(dict(depth=int(d), mmlu=float(mmlu[d]), drop=drop, low=low, high=high,
                         holds=not (drop > tolerance and low > 0), test="paired"))
    return pd.DataFrame(rows, columns=["depth", "mmlu", "drop", "low", "high", "holds", "test"])


def minimal_depth(gradual: pd.DataFrame, mmlu_tasks: list[str], tolerance: float, at_least: int = 2,
                  answers: dict[int, pd.DataFrame] | None = None) -> int:
    """The paper's "minimal model" (Llama-3.1-8B: layers 0..17, so L = 18): the smallest depth L such
    that every depth >= L holds by :func:`depth_table`: with ``answers``, no depth from L up has an
    MMLU drop from the full model beyond ``tolerance`` by point estimate with its paired 95% interval
    wholly above zero; without, every point estimate within ``tolerance``. Never below ``at_least``
    (a one-layer model has no layer to remove beside the one that carries everything) unless the
    model is shallower."""
    table = depth_table(gradual, mmlu_tasks, tolerance, answers).set_index("depth")
    table = table[table.index >= min(at_least, int(table.index.max()))]
    depth = int(table.index.max())
    for d in sorted(table.index, reverse=True):
        if not table.holds[d]:
            break
        depth = int(d)
    return depth


def fall_candidates(gradual: pd.DataFrame, mmlu_tasks: list[str]) -> dict:
    """Where Fig. 2's MMLU falls most: the depth ``fall`` above the largest drop between consecutive
    depths (cutting layer ``fall - 1`` costs most), and the candidate minimal depths around it
    (``fall - 1``, ``fall``, ``fall + 1`` within the model), reported beside the chosen minimal depth."""
    mmlu = metric_by(gradual, "depth", mmlu_tasks)
    steps = mmlu.diff().dropna()   # steps[d] = mmlu[d] - mmlu[d - 1]: what keeping layer d - 1 adds
    if steps.empty:
        d = int(mmlu.index.max())
        return {"fall": d, "fall_drop": 0.0, "candidates": [d]}
    fall = int(steps.idxmax())
    return {"fall": fall, "fall_drop": float(steps[fall]),
            "candidates": [d for d in (fall - 1, fall, fall + 1) if d in mmlu.index]}


def holm(p_values: dict, alpha: float = ALPHA) -> dict:
    """Holm's step-down procedure: which of the ``p_values`` (key -> p) are rejected at family-wise
    level ``alpha``: the k-th smallest against ``alpha / (m - k + 1)``, stopping at the first kept."""
    out, m = {key: False for key in p_values}, len(p_values)
    for k, (key, p) in enumerate(sorted(p_values.items(), key=lambda kv: (kv[1], str(kv[0])))):
        if p > alpha / (m - k):
            break
        out[key] = True
    return out


CRITICAL_COLUMNS = ["layer", "mmlu", "knowledge", "mmlu_lost", "collapsed", "mmlu_lost_answers", "mmlu_gained_answers",
                    "mmlu_p", "significant", "knowledge_drop", "knowledge_low", "knowledge_high", "knowledge_margin",
                    "knowledge_kept", "knowledge_lost", "test", "critical", "decided"]


def critical_table(individual: pd.DataFrame, mmlu_tasks: list[str], knowledge_tasks: list[str],
                   base_mmlu: float, base_knowledge: float, minimal_answers: pd.DataFrame | None,
                   layer_answers: dict[int, pd.DataFrame | None], chance: float = 0.25, collapse: float = 0.5,
                   knowledge_margin: float = 0.1, knowledge_chance: float | None = None,
                   alpha: float = ALPHA) -> pd.DataFrame:
    """Fig. 3's verdict per removed layer of the minimal model, tested on each question's answer.

    A layer is *critical* when removing it (a) loses at least ``collapse`` of the minimal model's MMLU
    above ``chance`` by point estimate, (b) that loss is beyond noise: the exact McNemar test of the
    minimal model's answers against the layer's (MMLU tasks pooled) rejects at ``alpha``,
    Holm-corrected over every layer tested, and (c) knowledge stays: the paired 95% interval of the
    knowledge drop (the knowledge tasks' questions pooled) lies within +-margin, the margin being
    ``knowledge_margin`` of the minimal model's knowledge above ``knowledge_chance`` (0 where unknown).
    A layer whose removal breaks knowledge is not critical (the notebook: critical layers do not
    carry knowledge), and neither is one whose knowledge interval is too wide to show it stays.

    A layer is *decided* where the sample settles it: critical, or not collapsed, or its knowledge
    shown lost (``knowledge_lost``: the interval wholly above the margin). A collapsed layer whose
    knowledge interval reaches into the margin without fitting in it is undecided: "no critical
    layer" is then not a finding, only a sample too small to show one (:func:`undecided_layers`).

    ``minimal_answers``: the minimal model's answers (its gradual-pruning depth); ``layer_answers``:
    removed layer -> the answers without it. Refused, in one line, where any tested layer or the
    minimal model kept none (no fallback to point estimates). Columns: ``CRITICAL_COLUMNS``
    (``mmlu_lost``: the share of above-chance MMLU lost; ``mmlu_p``: McNemar's, before Holm;
    ``test``: ``paired``)."""
    ok = individual[individual.applicable.astype(bool)]
    mmlu = metric_by(ok, "layer", mmlu_tasks)
    know = metric_by(ok, "layer", knowledge_tasks)
    above = base_mmlu - chance
    margin = knowledge_margin * (base_knowledge - (knowledge_chance or 0.0))
    both = list(dict.fromkeys([*mmlu_tasks, *knowledge_tasks]))
    base = _answered(minimal_answers, both, "the minimal model")
    counts: dict[int, tuple[Paired, Paired]] = {}
    for layer in mmlu.index:
        removed = _answered(layer_answers.get(int(layer)), both, f"the minimal model without layer {int(layer)}")
        counts[int(layer)] = (pooled(base, removed, mmlu_tasks), pooled(base, removed, knowledge_tasks))
    rejected = holm({layer: m.p_value for layer, (m, _) in counts.items()}, alpha)
    rows = []
    for layer, (m, k) in counts.items():
        lost = (base_mmlu - mmlu[layer]) / above if above > 0 else 0.0
        collapsed = bool(above > 0 and lost >= collapse)
        significant = bool(rejected[layer] and m.difference > 0)
        low, high = k.interval()
        kept = bool(margin > 0 and -margin <= low and high <= margin)
        lost_knowledge = bool(low > margin)
        critical = collapsed and significant and kept
        rows.append({"layer": layer, "mmlu": float(mmlu[layer]), "knowledge": float(know.get(layer, float("nan"))),
                     "mmlu_lost": float(lost), "collapsed": collapsed, "mmlu_lost_answers": m.first_only,
                     "mmlu_gained_answers": m.second_only, "mmlu_p": m.p_value, "significant": significant,
                     "knowledge_drop": k.difference, "knowledge_low": low, "knowledge_high": high,
                     "knowledge_margin": margin, "knowledge_kept": kept, "knowledge_lost": lost_knowledge,
                     "test": "paired", "critical": critical, "decided": critical or not collapsed or lost_knowledge})
    return pd.DataFrame(rows, columns=CRITICAL_COLUMNS)


def knowledge_floor(minimal_answers: pd.DataFrame, knowledge_tasks: list[str]) -> float:
    """The narrowest knowledge interval the sample can give: the upper end of the paired 95% interval
    of a drop where no answer changes (the minimal model against itself). A margin below it cannot
    be met by any layer, so "knowledge stays" cannot be shown at this sample's size."""
    return pooled(minimal_answers, minimal_answers, knowledge_tasks).interval()[1]


def undecided_layers(table: pd.DataFrame) -> list[int]:
    """The layers of :func:`critical_table` the sample leaves open: MMLU collapses without them, but
    their knowledge is neither shown to stay nor shown lost (or their loss is not beyond noise)."""
    return sorted(int(r.layer) for r in table.itertuples() if not r.decided)


def below_floor(critical: dict) -> str:
    """From a critical-layers json: where its knowledge margin is narrower than the narrowest interval
    its sample allows (``knowledge_within`` < ``knowledge_floor``), the sentence saying so; else ""."""
    within, floor = critical.get("knowledge_within"), critical.get("knowledge_floor")
    if within is None or floor is None or within >= floor:
        return ""
    return f"no layer can keep knowledge within +-{within:.3f}: the narrowest interval here is +-{floor:.3f}"


def critical_layers(table: pd.DataFrame) -> list[int]:
    """Every critical layer of :func:`critical_table`, in layer order (possibly none)."""
    return sorted(int(r.layer) for r in table.itertuples() if r.critical)


def table1_layers(table: pd.DataFrame) -> list[int]:
    """Table 1's layers, in layer order: the two critical layers whose removal costs MMLU most
    (Gather, then Aggregate), or the one where only one is critical (its heads kept alone);
    [] where none is (no fallback to other layers: Table 1's MMLU search is then n/a)."""
    crit = table[table.critical].sort_values(["mmlu_lost", "layer"], ascending=[False, True])
    return sorted(int(x) for x in crit.layer.head(2))


def critical_result(individual: pd.DataFrame, minimal: dict, gradual: pd.DataFrame, gradual_answers: list[str],
                    layer_answers: list[str], *, mmlu: list[str], knowledge: list[str], layers: list[int],
                    depths: list[int], chance: float, collapse: float, knowledge_margin: float,
                    knowledge_chance: float | None, log) -> dict:
    """Fig. 3's choice (rule critical_layers): the critical layers (MMLU collapses beyond noise, knowledge
    shown to stay), tested on each question's answer against the minimal model's, and Table 1's layers, as
    the json the rule writes. ``individual``: every removal's rows; ``gradual_answers`` / ``layer_answers``: the
    answers files of each depth in ``depths`` and of each removed layer in ``layers``."""
    depth = minimal["minimal_depth"]
    base_mmlu = float(metric_by(gradual, "depth", mmlu)[depth])
    base_knowledge = float(metric_by(gradual, "depth", knowledge)[depth])
    base_answers = _answers_file(gradual_answers[depths.index(depth)])
    removed = {layer: _answers_file(f) for layer, f in zip(layers, layer_answers) if layer < depth}
    verdicts = critical_table(individual, mmlu, knowledge, base_mmlu, base_knowledge, base_answers, removed,
                              chance=chance, collapse=collapse, knowledge_margin=knowledge_margin,
                              knowledge_chance=knowledge_chance)
    critical, kept, undecided = critical_layers(verdicts), table1_layers(verdicts), undecided_layers(verdicts)
    log.info("minimal model (depth %d): MMLU %.3f, knowledge %.3f\n%s\ncritical layers %s, Table 1 layers %s, "
             "undecided %s", depth, base_mmlu, base_knowledge, verdicts.to_string(index=False), critical, kept,
             undecided)
    tested = {"critical_layers": critical, "table1_layers": kept, "undecided_layers": undecided,
              "knowledge_within": float(verdicts.knowledge_margin.iloc[0]) if len(verdicts) else None,
              "knowledge_floor": knowledge_floor(base_answers, knowledge), "minimal_depth": depth,
              "fall": minimal.get("fall"), "candidates": minimal.get("candidates"), "base_mmlu": base_mmlu,
              "base_knowledge": base_knowledge, "chance": chance, "collapse": collapse,
              "knowledge_margin": knowledge_margin, "knowledge_chance": knowledge_chance, "test": "paired",
              "layers": verdicts.to_dict(orient="records")}
    if floor_note := below_floor(tested):
        log.warning("%s (a drop where no answer changes): no layer can be shown to keep knowledge on this sample",
                    floor_note)
    return tested


def _answers_file(path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"item": str, "target": str})


def minimal_result(gradual: pd.DataFrame, answer_paths: list[str], *, mmlu: list[str], depths: list[int],
                   tolerance: float, log) -> dict:
    """Fig. 2's choice (rule minimal_model): the minimal depth, judged on each question's answer (one answers
    file per depth of ``depths``), the depths' table and the candidates around the fall, as the json the
    rule writes."""
    answers = {int(d): _answers_file(f) for d, f in zip(depths, answer_paths)}
    depth = minimal_depth(gradual, mmlu, tolerance, answers=answers)
    table, fall = depth_table(gradual, mmlu, tolerance, answers), fall_candidates(gradual, mmlu)
    log.info("minimal depth %d (tolerance %.3f, paired intervals)\n%s\nlargest fall below depth %d (%.3f); "
             "candidates %s", depth, tolerance, table.to_string(index=False), fall["fall"], fall["fall_drop"],
             fall["candidates"])
    return {"minimal_depth": depth, "tolerance": tolerance, "test": "paired",
            "rule": "the smallest depth from which no depth's MMLU drop from the full model is beyond the "
                    "tolerance by point estimate with its paired 95% interval wholly above zero", **fall,
            "depths": table.to_dict(orient="records")}
