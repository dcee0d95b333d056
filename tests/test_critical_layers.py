"""The protocol's critical layers and minimal depth, chosen on each question's answer: an MMLU loss
must be beyond noise (exact McNemar, Holm over the layers), knowledge must be shown to stay (its
paired interval within the margin), and a depth is cut only where its interval is beyond the
tolerance; Table 1 keeps heads in one critical layer, or says none is."""
import pandas as pd
import pytest

from gna.evaluation.items import COLUMNS
from gna.experiments.head_selection import NO_CRITICAL_LAYER, keeping_plan, keeping_roles, no_critical_note
from gna.experiments.pruning import (MissingAnswersError, critical_layers, critical_table, depth_table,
                                     fall_candidates, holm, knowledge_floor, minimal_depth, table1_layers,
                                     undecided_layers)


def answers(**tasks) -> pd.DataFrame:
    """An item table: per task a list of 0/1 values, question i being doc_id i."""
    rows = [dict(task=t, filter="none", metric="acc", doc_id=i, item=f"{t}{i:04d}", target="0", chosen=0,
                 answer=None, value=float(v)) for t, values in tasks.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows, columns=COLUMNS)


def changed(values: list[int], lost: int, gained: int = 0) -> list[int]:
    """``values`` with the first ``lost`` right answers made wrong and the first ``gained`` wrong ones right."""
    out, right, wrong = list(values), [i for i, v in enumerate(values) if v], [i for i, v in enumerate(values) if not v]
    for i in right[:lost]:
        out[i] = 0
    for i in wrong[:gained]:
        out[i] = 1
    return out


def rows_of(per_layer: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Individual-pruning rows (mean acc per task) from each removed layer's answers."""
    rows = [dict(layer=layer, applicable=True, task=task, metric="acc", value=sub.value.mean())
            for layer, a in per_layer.items() for task, sub in a.groupby("task")]
    return pd.DataFrame(rows)


BASE_MMLU = [1] * 14 + [0] * 6            # 0.70 on 20 questions: 0.45 above chance
BASE_KNOW = [1] * 360 + [0] * 40           # 0.90 on 400: margin 0.09 (a tenth, chance 0)


def test_a_collapse_by_point_estimate_that_the_paired_test_does_not_carry_is_not_critical():
    base = answers(mmlu=BASE_MMLU, know=BASE_KNOW)
    layers = {0: answers(mmlu=changed(BASE_MMLU, 5), know=BASE_KNOW),     # 0.70 -> 0.45 (56% lost): McNemar 5 vs 0
              1: answers(mmlu=changed(BASE_MMLU, 12), know=BASE_KNOW)}    # 0.70 -> 0.10: p = 2 / 2^12
    t = critical_table(rows_of(layers), ["mmlu"], ["know"], 0.70, 0.90, base, layers).set_index("layer")
    assert t.collapsed[0] and t.mmlu_lost[0] >= 0.5 and t.mmlu_p[0] == pytest.approx(2 * 0.5 ** 5)
    assert not t.significant[0] and not t.critical[0]
    assert t.significant[1] and t.knowledge_kept[1] and t.critical[1]
    assert list(t.test) == ["paired", "paired"]


def test_holm_over_the_layers_tested():
    assert holm({"a": 0.01, "b": 0.03, "c": 0.04}) == {"a": True, "b": False, "c": False}
    assert holm({"a": 0.01, "b": 0.02}) == {"a": True, "b": True}
    assert holm({"a": 0.03}) == {"a": True}


def test_a_knowledge_drop_whose_interval_leaves_the_margin_is_not_critical():
    know = [1] * 36 + [0] * 4                 # 0.90 on 40 questions: margin 0.09
    base = answers(mmlu=BASE_MMLU, know=know)
    # knowledge 0.90 -> 0.875 (within the point tolerance of 0.05), but on 40 questions its interval is wide
    layers = {0: answers(mmlu=changed(BASE_MMLU, 12), know=changed(know, 3, 2)),
              1: answers(mmlu=changed(BASE_MMLU, 12), know=know)}
    t = critical_table(rows_of(layers), ["mmlu"], ["know"], 0.70, 0.90, base, layers).set_index("layer")
    assert t.knowledge_drop[0] == pytest.approx(0.025) and t.knowledge_high[0] > 0.09
    assert t.significant[0] and not t.knowledge_kept[0] and not t.critical[0]
    assert t.critical[1]                      # the same MMLU loss with knowledge unchanged


def test_a_layer_that_breaks_knowledge_is_not_critical_and_the_margin_scales_with_its_chance():
    base = answers(mmlu=BASE_MMLU, know=BASE_KNOW)
    layers = {0: answers(mmlu=changed(BASE_MMLU, 12), know=changed(BASE_KNOW, 200)),
              1: answers(mmlu=changed(BASE_MMLU, 12), know=changed(BASE_KNOW, 8))}   # a drop of 0.02
    args = (rows_of(layers), ["mmlu"], ["know"], 0.70, 0.90, base, layers)
    assert critical_layers(critical_table(*args)) == [1]
    # knowledge near its chance: a tenth of little above it is a margin no interval fits in
    near = critical_table(*args, knowledge_chance=0.85).set_index("layer")
    assert near.knowledge_margin[1] == pytest.approx(0.005) and critical_layers(near.reset_index()) == []


def test_no_critical_layer_is_a_finding_only_where_the_sample_settles_every_collapsed_layer():
    base = answers(mmlu=BASE_MMLU, know=BASE_KNOW)
    layers = {0: answers(mmlu=changed(BASE_MMLU, 12), know=changed(BASE_KNOW, 200)),   # knowledge broken
              1: answers(mmlu=changed(BASE_MMLU, 12), know=BASE_KNOW),                 # knowledge unchanged
              2: answers(mmlu=BASE_MMLU, know=BASE_KNOW)}                              # MMLU unchanged
    args = (rows_of(layers), ["mmlu"], ["know"], 0.70, 0.90, base, layers)
    t = critical_table(*args).set_index("layer")
    assert list(t.decided) == [True, True, True] and t.knowledge_lost[0] and list(t.critical) == [False, True, False]
    # knowledge near its chance: a margin of 0.005 that no interval on 400 questions fits in, even with
    # no answer changed, leaves the collapsed layer open instead of calling it "not critical"
    near = critical_table(*args, knowledge_chance=0.85).set_index("layer")
    floor = knowledge_floor(base, ["know"])
    assert near.knowledge_margin[1] == pytest.approx(0.005) and near.knowledge_margin[1] < floor
    assert near.knowledge_high[1] == pytest.approx(floor)
    assert critical_layers(near.reset_index()) == [] and undecided_layers(near.reset_index()) == [1]
    assert near.decided[0] and near.decided[2]                # knowledge shown lost; MMLU kept
    note = no_critical_note({"table1_layers": [], "undecided_layers": [1], "knowledge_within": 0.005,
                             "knowledge_floor": floor})
    assert note.startswith("n/a: critical layers not resolved (MMLU collapses without L1")
    assert f"the narrowest interval here is +-{floor:.3f}" in note
    assert no_critical_note({"table1_layers": [], "undecided_layers": []}) == NO_CRITICAL_LAYER
    roles, why = keeping_roles("discovered", "both", 3, layers=[], none=note)
    assert roles is None and why == note


def test_pooled_knowledge_tasks_and_a_refusal_without_answers():
    base = answers(mmlu=BASE_MMLU, k1=BASE_KNOW[:200], k2=BASE_KNOW[200:])
    layers = {0: answers(mmlu=changed(BASE_MMLU, 12), k1=changed(BASE_KNOW[:200], 4), k2=BASE_KNOW[200:])}
    t = critical_table(rows_of(layers), ["mmlu"], ["k1", "k2"], 0.70, 0.90, base, layers)
    assert t.knowledge_drop[0] == pytest.approx(4 / 400)        # the two tasks' 400 questions as one sample
    with pytest.raises(MissingAnswersError, match="without layer 0 has no per-question answers for k2"):
        critical_table(rows_of(layers), ["mmlu"], ["k1", "k2"], 0.70, 0.90, base,
                       {0: answers(mmlu=BASE_MMLU, k1=BASE_KNOW[:200])})
    with pytest.raises(MissingAnswersError, match="the minimal model has no per-question answers"):
        critical_table(rows_of(layers), ["mmlu"], ["k1", "k2"], 0.70, 0.90, None, layers)


def _critical(*ok: bool) -> pd.DataFrame:
    return pd.DataFrame({"layer": range(len(ok)), "critical": ok, "mmlu_lost": [0.9 - 0.1 * i for i in range(len(ok))]})


def test_one_critical_layer_gives_a_one_layer_table1():
    assert table1_layers(_critical(False, True, False)) == [1]
    assert table1_layers(_critical(True, True, True)) == [0, 1]          # the two that cost MMLU most
    scores = pd.DataFrame({"layer": [1, 1, 1], "head": [0, 1, 2], "mmlu": [0.6, 0.3, 0.5]})
    roles, note = keeping_roles("discovered", "both", 3, layers=[1], scores=scores, kind="attention")
    assert roles == {"gather": [[1, 1, "attention"]], "aggregate": []} and note == ""
    assert keeping_plan(roles, "both")[1] == {"L1": "1"} and keeping_plan(roles, "neither")[1] == {"L1": "none"}
    for condition in ("gather_only", "aggregate_only"):   # the same as 'both' / 'neither': not run again
        assert keeping_roles("discovered", condition, 3, layers=[1], scores=scores, kind="attention")[1].startswith("n/a")


def test_no_critical_layer_gives_na_and_no_search_elsewhere():
    assert table1_layers(_critical(False, False)) == []
    for condition in ("both", "neither"):
        assert keeping_roles("discovered", condition, 3, layers=[]) == (None, NO_CRITICAL_LAYER)
    assert NO_CRITICAL_LAYER == "n/a: no critical layer"


def test_table1_on_the_scans_top_gather_and_aggregate_heads():
    ga = pd.DataFrame({"layer": [2, 1, 0, 1], "head": [3, 0, 1, 2], "kind": ["attention"] * 4, "rank": [1, 2, 3, 4],
                       "role": ["gather", "aggregate", "aggregate", None]})
    roles, note = keeping_roles("scan", "aggregate_only", 3, ga=ga)
    assert note == "" and roles == {"gather": [[2, 3, "attention"]], "aggregate": [[1, 0, "attention"]]}
    assert keeping_plan(roles, "aggregate_only")[1] == {"L1": "0", "L2": "none"}   # each alone in its layer
    assert keeping_roles("scan", "both", 2, ga=ga)[1] == "n/a: L2H3 outside the minimal model (layers 0..1)"
    assert "no head of the scan's classified top is gather" in keeping_roles("scan", "both", 3, ga=ga[ga.role != "gather"])[1]
    # read as Fig. 4's heads (scan_heads_by: pattern): an Aggregate pattern whose KV drop the noise test
    # left unlabelled still counts, ranked above the labelled one
    ga = ga.assign(gather_score=[0.6, 0.1, 0.1, 0.1], aggregate_score=[0.1, 0.5, 0.5, 0.4],
                   role=["gather", None, "aggregate", None])
    assert keeping_roles("scan", "both", 3, ga=ga)[0]["aggregate"] == [[0, 1, "attention"]]
    roles, note = keeping_roles("scan", "both", 3, ga=ga, heads_by="pattern", threshold=0.3)
    assert note == "" and roles == {"gather": [[2, 3, "attention"]], "aggregate": [[1, 0, "attention"]]}
    assert keeping_roles("scan", "both", 3, ga=ga, heads_by="pattern", threshold=0.7)[1] == (
        "n/a: no head of the scan's classified top has the pattern of gather or aggregate")


# ---------------------------------------------------------------- the minimal depth with its interval

FULL = [1] * 60 + [0] * 40


def _gradual():
    # depth 4 the full model; 3 drops 0.06 but 9 lost against 3 gained is no drop beyond noise;
    # 2 drops 0.07 with every change a loss (real, though its interval reaches below the tolerance);
    # 1 collapses
    per_depth = {4: FULL, 3: changed(FULL, 9, 3), 2: changed(FULL, 7), 1: changed(FULL, 35)}
    rows = pd.DataFrame([dict(depth=d, task="mmlu", metric="acc", value=sum(v) / len(v)) for d, v in per_depth.items()])
    return rows, {d: answers(mmlu=v) for d, v in per_depth.items()}


def test_the_minimal_depth_is_cut_where_its_loss_is_beyond_the_tolerance_and_beyond_noise():
    rows, per_depth = _gradual()
    assert minimal_depth(rows, ["mmlu"], 0.05) == 4                       # the point estimate: 0.06 > 0.05
    t = depth_table(rows, ["mmlu"], 0.05, per_depth).set_index("depth")
    assert t["drop"][3] == pytest.approx(0.06) and t.low[3] < 0 and t.holds[3]
    # a significant loss of 0.07 is cut although its interval does not clear the tolerance itself: the
    # minimal model keeps the full model's MMLU, as the paper's does
    assert t["drop"][2] == pytest.approx(0.07) and 0 < t.low[2] <= 0.05 and not t.holds[2]
    assert minimal_depth(rows, ["mmlu"], 0.05, answers=per_depth) == 3
    assert fall_candidates(rows, ["mmlu"]) == {"fall": 2, "fall_drop": pytest.approx(0.28), "candidates": [1, 2, 3]}
    with pytest.raises(MissingAnswersError, match="depth 2 has no per-question answers for mmlu"):
        minimal_depth(rows, ["mmlu"], 0.05, answers={**per_depth, 2: None})


# ---------------------------------------------------------------- the findings and Table 1 read them

def test_fig3_findings_take_the_tested_critical_layers_where_the_run_has_them(tmp_path):
    import json

    from gna.report.findings import heads as head_findings
    from gna.report.findings import pruning as pruning_findings
    rows = [dict(model="m", experiment="gradual", layers=f"0..{d - 1}", depth=d, minimal_depth=3, mmlu=v, knowledge=0.9)
            for d, v in ((1, 0.3), (2, 0.3), (3, 0.8))]
    rows += [dict(model="m", experiment="minimal (0..2) minus layer", layers=f"L{layer}", depth=2, minimal_depth=3,
                  mmlu=v, knowledge=0.9) for layer, v in ((0, 0.75), (1, 0.3), (2, 0.75))]
    pd.DataFrame(rows).to_csv(tmp_path / "layer_pruning.csv", index=False)
    assert pruning_findings.individual(tmp_path)[0]["verdict"] == "holds"       # L1 by point estimates
    layer = dict(knowledge_margin=0.065, collapsed=False, significant=False, critical=False)
    tested = {"layers": [{**layer, "layer": 0}, {**layer, "layer": 1, "collapsed": True, "significant": True},
                         {**layer, "layer": 2}]}
    (tmp_path / "m.critical.json").write_text(json.dumps(tested))
    r = pruning_findings.individual(tmp_path, critical_json=str(tmp_path / "{model}.critical.json"))[0]
    assert r["verdict"] == "partly" and "McNemar, Holm over 3 layers" in r["evidence"]
    assert "(no layer collapses MMLU with knowledge kept: no critical layer)" in r["evidence"]
    # the same collapse, left open by the sample: not called "no critical layer"
    (tmp_path / "m.critical.json").write_text(json.dumps({**tested, "undecided_layers": [1], "knowledge_within": 0.009,
                                                          "knowledge_floor": 0.016}))
    r = pruning_findings.individual(tmp_path, critical_json=str(tmp_path / "{model}.critical.json"))[0]
    assert "no critical layer" not in r["evidence"]
    assert ("no layer shown critical; without L1 MMLU collapses, knowledge neither shown to stay nor to go; no layer "
            "can keep knowledge within +-0.009: the narrowest interval here is +-0.016") in r["evidence"]
    # Table 1 with one critical layer: 'both' and 'neither' judged, the two others n/a
    keep = [dict(model="m", source="discovered", condition=c, gather="L1H2", aggregate=None, mmlu=m, knowledge=90.0)
            for c, m in (("both", 79.0), ("neither", 25.0))]
    keep += [dict(model="m", source="discovered", condition=c, gather="L1H2", aggregate=None, kept="nothing",
                  note="n/a: one critical layer (L1)") for c in ("gather_only", "aggregate_only")]
    pd.DataFrame(keep).to_csv(tmp_path / "head_keeping.csv", index=False)
    t1 = head_findings.head_keeping(tmp_path)[0]
    assert t1["model"] == "m (discovered heads L1H2, one critical layer)" and t1["verdict"] == "holds"
    assert "gather only n/a, aggregate only n/a, neither 25.0" in t1["evidence"]
