"""The findings' one verdict rule (gna.report.verdict): "holds" only beyond the line, "does not hold" only
where the interval excludes the paper's own effect scaled to the model, "not resolved" otherwise, and
"underpowered" with the smallest detectable effect; the paper's effects in one table with sources."""
import ast
import inspect
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from gna.report.findings import heads as head_findings
from gna.report.findings import topk as topk_findings
from gna.report.findings import head_scan, hybrid_attention, layer_swap, row_sweep, ssm_masking
from gna.report.findings import inference_memory, paper, pruning, sampled
from gna.report.verdict import Part, claim_verdict

ROOT = Path(__file__).resolve().parents[1]


def fall(low, high, line=0.10, paper_effect=0.30, detectable=None, above=True):
    return Part("x", (low + high) / 2, low, high, line, above, paper_effect, detectable)


def test_does_not_hold_needs_the_interval_to_exclude_the_papers_effect():
    # below the line, and below the paper's effect: refuted
    assert fall(-0.02, 0.06).verdict == "does not hold"
    # below the line, but the paper's own (smaller) effect lies inside: not refuted
    assert fall(-0.02, 0.06, paper_effect=0.04).verdict == "not resolved"
    # a part claiming something stays: refuted only beyond its margin and the paper's change
    assert fall(0.12, 0.20, line=0.05, paper_effect=0.0, above=False).verdict == "does not hold"
    assert fall(0.12, 0.20, line=0.05, paper_effect=0.15, above=False).verdict == "not resolved"


def test_an_interval_straddling_the_line_is_not_resolved_both_ways():
    assert fall(0.05, 0.20).verdict == "not resolved"                                  # a claimed effect
    assert fall(0.02, 0.08, line=0.05, paper_effect=0.0, above=False).verdict == "not resolved"   # a claimed stay
    assert fall(0.11, 0.20).verdict == "holds" and fall(-0.05, 0.04, line=0.05, above=False).verdict == "holds"


def test_a_verdict_under_its_power_says_so_with_the_smallest_detectable_effect():
    assert fall(0.0, 0.25, detectable=0.40).verdict == "not resolved (underpowered: smallest detectable effect 0.40)"
    assert fall(0.0, 0.25, detectable=0.20).verdict == "not resolved"
    # an interval beyond the line, or excluding the paper's effect, is one at any power
    assert fall(0.12, 0.50, detectable=0.40).verdict == "holds"
    assert fall(-0.10, 0.05, detectable=0.40).verdict == "does not hold"


def test_a_claims_parts_make_its_verdict():
    held, refuted, open_, weak = fall(0.2, 0.3), fall(-0.1, 0.0), fall(0.0, 0.2), fall(0.0, 0.2, detectable=0.5)
    assert claim_verdict([held, held]) == "holds"
    assert claim_verdict([held, refuted]) == "partly"
    assert claim_verdict([refuted, open_]) == "does not hold"
    assert claim_verdict([held, open_]) == "not resolved"
    assert claim_verdict([held, weak]) == "not resolved (underpowered: smallest detectable effect 0.50)"


def test_the_papers_effect_is_scaled_to_the_models_above_chance_range():
    e = paper.effect("table1_neither")                 # 66.32 -> 25.56, chance 25
    assert e.scaled(0.45, 0.25) == pytest.approx((66.32 - 25.56) / (66.32 - 25.0) * (0.45 - 0.25))
    assert paper.effect("fig2_collapse").scaled(0.45, 0.25) == pytest.approx(0.20)   # to chance: the whole range
    gain = paper.effect("layer_swap")                  # a gain, by the headroom: 33 -> 50 of 67 left
    assert gain.scaled(0.40, 0.25) == pytest.approx(17 / 67 * 0.60)
    assert paper.effect("fig4_growth").scaled(0.9, 0.1) is None                     # curves only
    # top-k: the paper's largest k whose share of its 1,024 heads is at most ours
    assert paper.at_share("topk", "mmlu", 8 / 336).condition.startswith("top-20")
    assert paper.at_share("topk", "mmlu", 0.005).condition.startswith("top-10")
    with pytest.raises(KeyError, match="paper effect 'nope': 0 rows"):
        paper.effect("nope")


def test_topk_at_n_91_cannot_refute_the_papers_effect(tmp_path):
    """The real study's top-k row (45.0 -> 45.0 on 91 questions) was 'does not hold'; the paper's
    effect scaled to the model lies inside its interval, and 91 questions cannot see it."""
    rows = [dict(model="q", k=0, heads_pct=0.0, mmlu=100 * 41 / 91, knowledge=100 * 31 / 91),
            dict(model="q", k=8, heads_pct=100 * 8 / 336, mmlu=100 * 41 / 91, knowledge=100 * 31 / 91,
                 random_draws=1, random_mmlu=100 * 40 / 91, random_mmlu_min=100 * 40 / 91,
                 random_mmlu_max=100 * 40 / 91)]
    pd.DataFrame(rows).to_csv(tmp_path / "topk.csv", index=False)
    (r,) = topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu"], ["knowledge"], {"mmlu_n": 91})
    assert r["verdict"].startswith("not resolved (underpowered: smallest detectable effect"), r
    assert "retrieval's fall, k 0 -> 8 +0.00 [" in r["evidence"] and "paper 0." in r["evidence"]


# --- one table of the paper's effects ----------------------------------------------------------

USERS = [sampled, pruning.gradual, pruning.individual, head_findings.head_keeping, head_findings._keeping_parts,
         head_findings._paper_table1, head_findings.kv_pairs, topk_findings.topk, topk_findings._topk_parts,
         head_scan.redundancy, ssm_masking, hybrid_attention, row_sweep, layer_swap, inference_memory]


def test_every_paper_effect_the_verdicts_use_is_a_row_of_the_table_with_its_source():
    t = paper.table()
    assert t.source.str.len().gt(20).all() and not t.duplicated(["claim", "task", "heads_removed"]).any()
    used = set()
    for user in USERS:
        src = inspect.getsource(user)
        used |= {(c, None) for c in re.findall(r'effect\(f?"([a-z0-9_]+)"', src)}
        used |= {(c, None) for c in re.findall(r"effect\('([a-z0-9_]+)'", src)}
    used |= {(f"table1_{c}", None) for c in ("gather_only", "aggregate_only", "neither")}
    used |= {("topk", task) for task in ("mmlu", "gsm8k", "swde", "bbh", "knowledge")}
    used |= {("arc_letter", task) for task in ("arc_challenge_chat", "arc_challenge")}
    assert len(used) > 15
    for claim, task in used:
        rows = t[(t.claim == claim) & ((t.task == task) if task else True)]
        assert len(rows) >= 1 and rows.source.notna().all(), claim
    # no paper number written into a verdict's code (docstrings and comments aside): they read the table
    for user in USERS:
        tree = ast.parse(textwrap.dedent(inspect.getsource(user)))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        src = ast.unparse(tree)
        for number in ("66.3", "25.6", "24.4", "64.3", "34.9", "13.2", "72.6", "99.3", "68.1", "61.9"):
            assert number not in src, (getattr(user, "__name__", user), number)


@pytest.mark.parametrize("name,claim,key", [
    ("ablation_topk.csv", "topk", lambda r: (r.metric, r.heads_removed)),
    ("arc_chat_vs_regular.csv", "arc_letter", lambda r: (r.metric, r.heads_removed)),
])
def test_the_tables_numbers_are_the_published_ones(name, claim, key):
    published = pd.read_csv(ROOT / "data/published" / name)
    llama = published[published.model == "llama-8b"].set_index(["metric", "heads_removed"]).value
    for r in paper.table()[paper.table().claim == claim].itertuples():
        assert r.before == llama[(r.task, 0)] and r.after == llama[(r.task, int(r.heads_removed))], r


def test_table1_and_the_hybrids_numbers_are_the_published_ones():
    keep = pd.read_csv(ROOT / "data/published/head_keeping.csv")
    mmlu = keep[keep.metric == "mmlu"].set_index(["l16_kept", "l17_kept"]).value
    assert paper.effect("table1_both").after == mmlu[("22", "24")]
    assert paper.effect("table1_gather_only").after == mmlu[("22", "none")]
    assert paper.effect("table1_aggregate_only").after == mmlu[("none", "24")]
    assert paper.effect("table1_neither").after == mmlu[("none", "none")]
    heads = pd.read_csv(ROOT / "data/published/hybrid_heads.csv")
    kv = heads[(heads.model == "hybrid-llama-1b") & (heads.metric == "kv_retrieval")].set_index("attention_heads").value
    assert (paper.effect("hybrid_heads").before, paper.effect("hybrid_heads").after) == (kv[0], kv[10])
    state = pd.read_csv(ROOT / "data/published/hybrid_state_size.csv")
    kv = state[state.metric == "kv_retrieval"].set_index("state_size").value
    assert (paper.effect("hybrid_state_size").before, paper.effect("hybrid_state_size").after) == (kv[4], kv[64])


# --- Fig. 3, Table 1 and top-k's control by the same rule, at micro scale too -------------------------

def _fig3_table(tmp_path, removed_mmlu, removed_knowledge):
    """A minimal model at MMLU 150/200, knowledge 540/600; one layer removed at the given counts."""
    rows = [dict(model="m", experiment="gradual", layers=f"0..{d - 1}", depth=d, minimal_depth=3, mmlu=v,
                 knowledge=0.9) for d, v in ((1, 0.3), (2, 0.3), (3, 0.75))]
    rows += [dict(model="m", experiment="minimal (0..2) minus layer", layers="L1", depth=2, minimal_depth=3,
                  mmlu=removed_mmlu / 200, knowledge=removed_knowledge / 600)]
    pd.DataFrame(rows).to_csv(tmp_path / "layer_pruning.csv", index=False)
    return {"task_n": {"mmlu": 200, "knowledge": 600}}


def test_fig3_on_the_micro_studys_task_n_is_judged_by_the_rule_with_n_and_interval(tmp_path):
    st = _fig3_table(tmp_path, 60, 535)   # MMLU .75 -> .30, knowledge .90 -> .89: critical
    r = pruning.individual(tmp_path, st)[0]
    assert r["verdict"] == "holds" and "(60/200," in r["evidence"] and "(535/600," in r["evidence"]
    assert "MMLU drop without L1 +0.45 [" in r["evidence"] and "paper 0." in r["evidence"]
    # the knowledge interval straddles its margin (a drop of .10, margin .09: a tenth of .90): not resolved;
    # beyond a margin of .05 (knowledge_margin .05 / .90): refuted, the claim 'partly'
    st = _fig3_table(tmp_path, 60, 480)
    assert pruning.individual(tmp_path, {**st, "knowledge_margin": 0.05 / 0.9})[0]["verdict"] == "partly"
    r = pruning.individual(tmp_path, st)[0]
    assert r["verdict"] == "not resolved" and "knowledge drop without L1 +0.10 [" in r["evidence"]
    # knowledge broken beyond the margin and beyond the paper's none: the layer is refuted, MMLU shown
    r = pruning.individual(tmp_path, _fig3_table(tmp_path, 60, 300))[0]
    assert r["verdict"] == "partly" and "knowledge drop without L1 +0.40" in r["evidence"]
    # knowledge near its chance: staying is not counted, but a fall shown beyond noise is a result
    near = {**_fig3_table(tmp_path, 60, 535), "knowledge_chance": 0.85, "knowledge_margin": 1.0}
    r = pruning.individual(tmp_path, near)[0]
    assert r["verdict"] == "partly" and "that it stays cannot fail" in r["evidence"]
    r = pruning.individual(tmp_path, {**_fig3_table(tmp_path, 60, 300), "knowledge_chance": 0.85})[0]
    assert "knowledge drop without L1 +0.40" in r["evidence"] and "cannot fail" not in r["evidence"]


def test_table1_on_task_n_takes_the_papers_numbers_from_the_table_and_judges_each_condition(tmp_path, monkeypatch):
    _fig3_table(tmp_path, 60, 535)
    keep = [dict(model="m", source="discovered", condition=c, gather="L1H2", aggregate="L2H0", mmlu=m, knowledge=k)
            for c, m, k in (("both", 74.0, 90.0), ("gather_only", 26.0, 89.5), ("aggregate_only", 25.0, 90.0),
                            ("neither", 25.5, 90.5))]
    pd.DataFrame(keep).to_csv(tmp_path / "head_keeping.csv", index=False)
    # 'both kept' within 5 points of the minimal model needs the interval of an unpaired drop under .05
    st = {"task_n": {"mmlu": 2000, "knowledge": 6000}}
    r = head_findings.head_keeping(tmp_path, st)[0]
    assert r["verdict"] == "holds", r
    small = head_findings.head_keeping(tmp_path, {"task_n": {"mmlu": 200, "knowledge": 600}})[0]
    assert small["verdict"].startswith("not resolved (underpowered"), small
    assert "MMLU fall, both kept -> aggregate only +0.49 [" in r["evidence"] and "(paper 0.4" in r["evidence"]
    assert "(paper: MMLU 66.3 / 25.6 / 24.4 / 25.6)" in r["evidence"]
    # the paper's numbers are the table's: another table, another text
    real = paper.effect
    monkeypatch.setattr(head_findings, "effect", lambda claim, task=None: (
        real(claim).__class__(**{**real(claim).__dict__, "after": 50.0}) if claim == "table1_neither" else real(claim)))
    assert "25.6 / 24.4 / 50.0)" in head_findings.head_keeping(tmp_path, st)[0]["evidence"]
    # 'aggregate only' keeping MMLU far above chance: that condition's part is not shown
    keep[2]["mmlu"] = 70.0
    pd.DataFrame(keep).to_csv(tmp_path / "head_keeping.csv", index=False)
    assert head_findings.head_keeping(tmp_path, st)[0]["verdict"] in ("partly", "does not hold")


def _topk_with_control(tmp_path, kv, random_kv, refuted=True):
    ranked = 50.0 if refuted else 10.0
    rows = [dict(model="m", k=0, heads_pct=0.0, mmlu=50.0, knowledge=90.0, kv=95.0, lambada_ppl=2.0),
            dict(model="m", k=3, heads_pct=1.0, mmlu=ranked, knowledge=90.0, kv=kv, lambada_ppl=9.0,
                 random_draws=5, random_mmlu=50.0, random_mmlu_min=48.0, random_mmlu_max=52.0,
                 random_kv=random_kv, random_kv_min=random_kv - 2, random_kv_max=random_kv + 2,
                 random_lambada_ppl=2.1, random_lambada_ppl_min=2.0, random_lambada_ppl_max=2.2,
                 random_knowledge=90.0, random_knowledge_min=89.0, random_knowledge_max=91.0)]
    pd.DataFrame(rows).to_csv(tmp_path / "topk.csv", index=False)
    return topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu", "lambada"], ["knowledge"],
                              {"task_n": {"mmlu": 10000, "knowledge": 10000, "kv": 100}})[0]


def test_topk_judges_its_kv_control_and_a_failed_control_refutes_nothing(tmp_path):
    # the control works: MMLU untouched refutes the fall, knowledge kept holds
    r = _topk_with_control(tmp_path, kv=20.0, random_kv=94.0)
    # (a table alone: each draw's KV not at hand, so the control is read off the draws' points)
    assert r["verdict"] == "partly" and "KV control at k 3: ranked 20.0 vs random 94.0 [92.0, 96.0] over 5 draws" in \
        r["evidence"] and "control failed" not in r["evidence"]
    r = _topk_with_control(tmp_path, kv=93.0, random_kv=94.0)   # the top heads' removal did not act
    assert r["verdict"] == "not resolved (control failed)" and "control failed" in r["evidence"]
    r = _topk_with_control(tmp_path, kv=93.0, random_kv=94.0, refuted=False)   # a fall shown stands, but
    # random minus ranked is not judged by draw without each draw's answers: no 'holds'
    assert r["verdict"] == "not resolved" and "control failed" in r["evidence"]
    assert "each random draw's answers not at hand" in r["evidence"]
    # LAMBADA by its perplexity is shown beside the verdict, with its random spread
    assert "lambada perplexity 2.000 -> 9.000 (random 2.100 [2.000, 2.200])" in r["evidence"]   # the table's digits


def test_the_real_presets_roles_are_counted_from_its_local_samples_not_the_mmlu_size():
    """The findings judge the knowledge suite on its own questions (6 tasks x 40), not on MMLU's 150:
    an accuracy over 240 is no count over 150."""
    import yaml

    from gna.config.schema import with_defaults
    from gna.plan.jobs import local_task_docs

    cfg = with_defaults(yaml.safe_load((ROOT / "workflow/configs/real.yaml").read_text()))
    sizes = sampled.local_sizes(cfg["tasks"], local_task_docs(cfg))
    size = cfg["benchmarks"]["suite"]["size"]
    assert sizes["mmlu"] == cfg["benchmarks"]["mmlu"]["size"]
    assert sizes["knowledge"] == sum(size[t.removesuffix("_local")] for t in cfg["tasks"]["knowledge"]) == 240
    assert sizes["lambada"] == size["lambada_openai"]
    assert "gsm8k" not in sizes   # generation is in the baselines only: no role of the study reads it
    assert sampled.n_of({"mmlu_n": 150, "task_n": sizes}, "knowledge") == 240
    with pytest.raises(ValueError, match="not a count"):
        sampled.acc(101 / 240, 150)


def test_lambada_is_judged_by_its_accuracy_with_its_perplexity_beside(tmp_path):
    """A LAMBADA-like task scores both: its accuracy (a count over its items) joins the retrieval
    side's test, pooled with MMLU's over their items, and its perplexity stays beside the verdict."""
    from gna.report.heads import role_scores

    rows = pd.DataFrame([dict(k=0, task="lam", metric=m, filter="none", value=v)
                         for m, v in (("perplexity", 50.0), ("acc", 0.26))])
    scores = role_scores(rows, {"lambada": ["lam"]}, "k")
    assert scores.loc[0, "lambada_ppl"] == 50.0 and scores.loc[0, "lambada"] == pytest.approx(26.0)

    # MMLU at chance is left out; LAMBADA's accuracy alone carries the claim and its random control
    table = [dict(model="m", k=0, heads_pct=0.0, mmlu=20.7, lambada=26.0, lambada_ppl=50.3, knowledge=47.5),
             dict(model="m", k=8, heads_pct=3.0, mmlu=20.7, lambada=10.0, lambada_ppl=152.3, knowledge=45.0,
                  random_draws=5, random_mmlu=20.7, random_mmlu_min=20.0, random_mmlu_max=20.7,
                  random_lambada=21.0, random_lambada_min=13.0, random_lambada_max=32.0,
                  random_lambada_ppl=74.3, random_lambada_ppl_min=43.7, random_lambada_ppl_max=101.6,
                  random_knowledge=45.4, random_knowledge_min=43.2, random_knowledge_max=47.0)]
    pd.DataFrame(table).to_csv(tmp_path / "topk.csv", index=False)
    r = topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu", "lambada"], ["knowledge"],
                           {"task_n": {"mmlu": 150, "lambada": 100, "knowledge": 240}})[0]
    assert r["verdict"] != "n/a", r
    assert "n = lambada 100, knowledge 240 questions" in r["evidence"]
    assert "retrieval's fall, k 0 -> 8 +0.16 [" in r["evidence"]
    assert "left out, the unmodified model near chance: mmlu (20.7)" in r["evidence"]
    assert "lambada perplexity 50.30 -> 152.3" in r["evidence"] and "152.30" not in r["evidence"]


def test_the_retrieval_side_pools_tasks_of_unequal_size_over_their_items(tmp_path):
    """MMLU's 150 and LAMBADA's 100 pool as 250 items: 60/150 and 26/100 right is 86/250, not the
    mean of the two shares (which is no count over 250)."""
    row = pd.Series(dict(mmlu=40.0, lambada=26.0))
    assert topk_findings._pooled(row, ["mmlu", "lambada"], [150, 100]) == pytest.approx(86 / 250)
    assert topk_findings._pooled(row, ["mmlu", "lambada"], [100, 100]) == pytest.approx(0.33)
    table = [dict(model="m", k=0, heads_pct=0.0, mmlu=40.0, lambada=26.0, knowledge=47.5),
             dict(model="m", k=10, heads_pct=3.0, mmlu=30.0, lambada=10.0, knowledge=45.0)]
    pd.DataFrame(table).to_csv(tmp_path / "topk.csv", index=False)
    r = topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu", "lambada"], ["knowledge"],
                           {"task_n": {"mmlu": 150, "lambada": 100, "knowledge": 240}})[0]
    assert "n = mmlu 150, lambada 100, knowledge 240 questions" in r["evidence"]
    assert "retrieval's fall, k 0 -> 10 +0.12 [" in r["evidence"]   # (86 - 55) / 250
