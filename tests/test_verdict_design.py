"""The design of the findings' tests: comparisons paired on the kept answers, random heads judged by
draw, a pick among many paid for, power against the distance from the line to the paper's effect, a
zero line refuted by a smallest effect of interest, one knowledge margin, Fig. 4's n from its own
probes, and every printed part a row of verdicts.csv."""
import re
from pathlib import Path

import pandas as pd
import pytest

from gna.evaluation.paired import newcombe_paired
from gna.report import findings
from gna.report.findings import heads as head_findings
from gna.report.findings import hybrid_attention as hybrid_attention_findings
from gna.report.findings import hybrid_distillation as distillation_findings
from gna.report.findings import sampled
from gna.report.findings import topk as topk_findings
from gna.report.findings.verdicts import knowledge_line, with_settings
from gna.report.verdict import Part

N = 400


def answers(folder: Path, k: int, draw: str, mmlu: list[int], knowledge: list[int]):
    """One removal's answers: each question's 0/1 on the MMLU-like and the knowledge task."""
    rows = [dict(task=task, filter="none", metric="acc", doc_id=i, item=f"{task}{i}", target="0", chosen="",
                 answer="", value=v)
            for task, values in (("t_mmlu", mmlu), ("t_kn", knowledge)) for i, v in enumerate(values)]
    path = folder / "answers" / "m" / f"k{k}{draw}.answers.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def right(n_right: int, n: int = N, offset: int = 0) -> list[int]:
    """``n_right`` of ``n`` answers right, starting at ``offset`` (wrapping)."""
    values = [0] * n
    for i in range(n_right):
        values[(offset + i) % n] = 1
    return values


def topk_study(tmp_path, draws_right: list[int], ranked_right: int = 160, full_right: int = 360):
    """A top-k table with k = 0, 1 and the random draws' answers kept, on N questions each."""
    kn = right(360)
    answers(tmp_path, 0, "", right(full_right), kn)
    answers(tmp_path, 1, "", right(ranked_right), kn)
    for seed, r in enumerate(draws_right, start=1):
        answers(tmp_path, 1, f"-random{seed}", right(r, offset=seed), kn)
    rnd = [100 * r / N for r in draws_right]
    rows = [dict(model="m", k=0, heads_pct=0.0, mmlu=100 * full_right / N, knowledge=90.0),
            dict(model="m", k=1, heads_pct=4.0, mmlu=100 * ranked_right / N, knowledge=90.0,
                 random_draws=len(rnd), random_mmlu=sum(rnd) / len(rnd), random_mmlu_min=min(rnd),
                 random_mmlu_max=max(rnd))]
    pd.DataFrame(rows).to_csv(tmp_path / "topk.csv", index=False)
    return topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu"], ["knowledge"],
                              {"task_n": {"mmlu": N, "knowledge": N}},
                              answers=str(tmp_path / "answers" / "{model}" / "k{k}{draw}.answers.csv"),
                              tasks={"mmlu": ["t_mmlu"], "knowledge": ["t_kn"]},
                              draws=list(range(1, len(draws_right) + 1)))[0]


def part_text(evidence: str, name: str) -> str:
    """One printed part, from its name to its verdict."""
    m = re.search(re.escape(name) + r".*?\): (holds|does not hold|not resolved(?: \(underpowered[^)]*\))?)",
                  evidence)
    assert m, (name, evidence)
    return m.group(0)


def test_a_topk_removal_with_kept_answers_is_judged_paired_by_a_hand_count(tmp_path):
    r = topk_study(tmp_path, [380, 382, 378, 381, 379])
    shown = part_text(r["evidence"], "retrieval's fall, k 0 -> 1")
    # by hand: the first 160 right in both, 200 right only without the removal, none only with it, 40 neither
    low, high = newcombe_paired(160, 200, 0, 40)
    assert f"+0.50 [{low:+.2f}, {high:+.2f}]" in shown and "n 400; paired" in shown
    # the answers gone: the same part says it is unpaired, and why
    for f in (tmp_path / "answers" / "m").glob("k0.answers.csv"):
        f.unlink()
    rows = topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu"], ["knowledge"],
                              {"task_n": {"mmlu": N, "knowledge": N}},
                              answers=str(tmp_path / "answers" / "{model}" / "k{k}{draw}.answers.csv"),
                              tasks={"mmlu": ["t_mmlu"], "knowledge": ["t_kn"]}, draws=[1, 2, 3, 4, 5])
    assert "unpaired; no per-item answers kept" in part_text(rows[0]["evidence"], "retrieval's fall")


def test_random_heads_are_judged_by_draw_not_by_their_pooled_items(tmp_path):
    # five draws that differ widely: pooled as 2,000 items random minus ranked is +0.30 with a tight
    # interval; with the draw as the unit (t, 4 df) its lower end falls under the smallest effect of interest
    wide = [200, 380, 220, 360, 240]
    pooled = sampled.part("pooled", sum(wide) / (5 * N), 160 / N, 5 * N, 0.0, None, n_second=N)
    assert pooled.verdict == "holds"
    r = topk_study(tmp_path, wide)
    shown = part_text(r["evidence"], "random minus ranked retrieval at k 1")
    assert "t interval over 5 draws' paired differences, 4 df" in shown and ": not resolved" in shown
    assert r["verdict"] != "holds"
    # draws that agree: the same test decides
    r = topk_study(tmp_path, [270, 272, 268, 271, 269])
    assert part_text(r["evidence"], "random minus ranked retrieval at k 1").endswith(": holds")
    assert r["verdict"] == "holds"


def test_the_hybrids_ranked_against_random_is_judged_by_draw():
    ranked = pd.DataFrame([dict(k=1, kv_retrieval=90.0, kv_retrieval_min=89.0, kv_retrieval_max=91.0)])
    random_ = pd.DataFrame([dict(k=1, kv_retrieval=50.0, kv_retrieval_min=10.0, kv_retrieval_max=90.0, draws=3)])
    scores = {"ranked": 0.90, "random1": 0.10, "random2": 0.50, "random3": 0.895}
    rows = distillation_findings.ranked_vs_random(ranked, random_, "h", 600,
                                            {"score": lambda k, sel: scores[sel], "seeds": [1, 2, 3]})
    assert "t interval over 3 random students' differences, 2 df" in rows[0]["evidence"]
    assert rows[0]["verdict"].startswith("not resolved")
    # without each student's score, no part is judged on pooled prompts
    rows = distillation_findings.ranked_vs_random(ranked, random_, "h", 600)
    assert rows[0]["verdict"] == "not resolved" and "not judged at the draw level" in rows[0]["evidence"]


def test_a_layer_picked_as_the_largest_of_24_is_not_held_on_an_unadjusted_interval():
    # the real study's Fig. 3 L0: 77/150 -> 38/150 against a line of 0.132
    unadjusted = sampled.part("MMLU drop without L0", 77 / 150, 38 / 150, 150, 0.132, 0.26)
    assert unadjusted.verdict == "holds"
    adjusted = sampled.part("MMLU drop without L0", 77 / 150, 38 / 150, 150, 0.132, 0.26, m=24)
    assert adjusted.low < 0.132 and adjusted.verdict != "holds"
    assert "99.79% interval: the extreme of 24, Bonferroni-adjusted" in adjusted.text()


def test_fig2s_depth_of_the_fall_is_judged_as_a_pick_among_the_cut_depths(tmp_path):
    from gna.report.findings import pruning

    def collapse(depths: int) -> str:
        # full 120/200 right, the minimal depth one layer under the full one, the fall to 58/200 one
        # under that: past a 0.5 collapse line on its own interval, not as the pick of 23 depths
        mmlu = [58 / 200] * (depths - 2) + [120 / 200, 120 / 200]
        rows = [dict(model="m", experiment="gradual", layers=f"0..{d - 1}", depth=d, mmlu=v, knowledge=0.9,
                     minimal_depth=depths - 1) for d, v in enumerate(mmlu, start=1)]
        pd.DataFrame(rows).to_csv(tmp_path / "layer_pruning.csv", index=False)
        r = pruning.gradual(tmp_path, {"mmlu_n": 200, "collapse": 0.5, "tolerance": 0.1})[0]
        return part_text(r["evidence"], "(collapse)")

    alone, picked = collapse(3), collapse(24)
    assert alone.endswith(": holds") and "the extreme of 2, Bonferroni-adjusted" in alone
    assert "the extreme of 23, Bonferroni-adjusted" in picked and not picked.endswith(": holds")


def test_table1s_best_other_condition_is_judged_as_a_pick_of_three(tmp_path):
    table = pd.DataFrame([dict(model="m", source="mmlu", condition=c, gather="L1H0", aggregate="L2H1", mmlu=v,
                               knowledge=90.0) for c, v in
                          (("both", 60.0), ("gather_only", 50.0), ("aggregate_only", 40.0), ("neither", 30.0))])
    table.to_csv(tmp_path / "head_keeping.csv", index=False)
    r = head_findings.head_keeping(tmp_path, {"mmlu_n": 200})[0]
    assert "the best other 0.50" in r["evidence"] and "(98.3% interval: the extreme of 3, Bonferroni-adjusted)" in r["evidence"]
    gap = sampled.drop(0.6, 0.5, 200, m=3)
    assert gap.alpha == pytest.approx(0.05 / 3) and gap.low < sampled.drop(0.6, 0.5, 200).low


def test_an_unresolved_part_is_underpowered_against_the_distance_from_line_to_paper():
    # Fig. 2's collapse part: detectable 0.135, line 0.128, paper 0.257: under the paper's effect, over the distance
    p = Part("collapse", 0.11, 0.02, 0.20, 0.128, True, 0.257, 0.135)
    assert p.verdict.startswith("not resolved (underpowered")
    assert Part("collapse", 0.11, 0.02, 0.20, 0.128, True, 0.257, 0.120).verdict == "not resolved"
    # a part that claims something stays is powered as an equivalence test: against its margin from the paper's
    assert Part("stay", 0.0, -0.06, 0.06, 0.05, False, 0.0, 0.07).verdict.startswith("not resolved (underpowered")


def test_a_zero_line_part_below_its_smallest_effect_of_interest_does_not_hold():
    below = Part("random minus ranked", 0.0, -0.02, 0.02, 0.0, soi=0.05)
    assert below.verdict == "does not hold"
    assert Part("random minus ranked", 0.0, -0.02, 0.02, 0.0).verdict == "not resolved"   # a line at 0 alone
    assert Part("x", 0.09, 0.06, 0.12, 0.0, soi=0.05).verdict == "holds"
    assert Part("x", 0.05, 0.02, 0.08, 0.0, soi=0.05).verdict == "not resolved"
    assert Part("x", 0.05, 0.00, 0.10, 0.0, soi=0.05, detectable=0.08).verdict.startswith("not resolved (underpowered")
    # the smallest effect of interest is a config value, passed to every section as a setting
    assert with_settings({})["smallest_effect"] == 0.05


def test_one_config_key_sets_the_knowledge_margin_of_every_section_that_judges_knowledge(tmp_path):
    st = {"task_n": {"mmlu": N, "knowledge": N}, "knowledge_margin": 0.2}
    assert knowledge_line(0.9, with_settings(st)) == pytest.approx(0.18)
    assert knowledge_line(0.9, with_settings({**st, "knowledge_chance": 0.4})) == pytest.approx(0.10)
    # top-k
    rows = [dict(model="m", k=0, heads_pct=0.0, mmlu=90.0, knowledge=90.0),
            dict(model="m", k=1, heads_pct=4.0, mmlu=40.0, knowledge=89.0)]
    pd.DataFrame(rows).to_csv(tmp_path / "topk.csv", index=False)
    r = topk_findings.topk(tmp_path, "topk.csv", "c", ["mmlu"], ["knowledge"], st)[0]
    assert "knowledge's fall +0.01 [" in r["evidence"] and "vs < 0.18 " in part_text(r["evidence"], "knowledge's fall")
    # the hybrids (masking a hybrid's attention heads)
    pd.DataFrame([dict(model="z", mode="ablate", k=0, mmlu=90.0, knowledge=90.0, heads_masked=0),
                  dict(model="z", mode="ablate", k=8, mmlu=30.0, knowledge=89.0, heads_masked=8)]).to_csv(
        tmp_path / "hybrid_attention.csv", index=False)
    r = hybrid_attention_findings.hybrid_attention(tmp_path, st)[0]
    assert "vs < 0.18 " in part_text(r["evidence"], "knowledge's fall")
    # no sampled knowledge part anywhere reads the point checks' knowledge_tolerance
    source = "".join(Path(m.__file__).read_text() for m in (topk_findings, hybrid_attention_findings, head_findings))
    assert not re.search(r"part\([^)]*knowledge_tolerance", source, re.S)


def test_fig4s_n_is_its_probes_prompts_times_seeds(tmp_path):
    rows = []
    for n_pairs, full, agg in ((2, 0.9, 0.8), (16, 0.9, 0.3)):
        for cond, a in (("full", full), ("no_gather", full - 0.1), ("no_aggregate", agg)):
            rows.append(dict(model="m", condition=cond, n_pairs=n_pairs, accuracy=a, probe_seeds=2))
    pd.DataFrame(rows).to_csv(tmp_path / "kv_pairs.csv", index=False)
    # kv_probe's 100 prompts (kv_n) are not Fig. 4's: it scores the first 50 of each probe set
    r = head_findings.kv_pairs(tmp_path, {"kv_n": 100}, prompts=50)[0]
    assert "n = 50 prompts x 2 probe seeds = 100 per point" in r["evidence"] and "n 100;" in r["evidence"]


def test_a_head_is_called_aggregate_only_where_the_ranking_classifies_it(tmp_path):
    from gna.experiments.head_selection import unclassified

    # the real study's Qwen: L22H7 reads like an Aggregate head, the ranking left it unclassified
    ga = pd.DataFrame([dict(layer=18, head=0, kind="attention", rank=1, role="gather"),
                       dict(layer=22, head=7, kind="attention", rank=2, role="unclassified")])
    assert unclassified(ga, [[22, 7, "attention"]], "aggregate") == ["L22H7"]
    assert unclassified(ga, [[18, 0, "attention"]], "gather") == [] and unclassified(None, [[22, 7]], "x") == []

    def evidence(heads_from: str) -> str:
        rows = [dict(model="m", condition=cond, head=head, heads_from=frm, n_pairs=n, accuracy=a, probe_seeds=2)
                for n, full, agg in ((2, 0.9, 0.8), (16, 0.9, 0.3))
                for cond, head, frm, a in (("full", "none", "classified", full),
                                           ("no_gather", "L18H0", "classified", full - 0.1),
                                           ("no_aggregate", "L22H7", heads_from, agg))]
        pd.DataFrame(rows).to_csv(tmp_path / "kv_pairs.csv", index=False)
        return head_findings.kv_pairs(tmp_path, {"kv_n": 50})[0]["evidence"]

    odd = evidence("pattern, unclassified")
    assert "drop without the top Aggregate-pattern head L22H7, unclassified," in odd
    assert "without Aggregate" not in odd and "without Gather (L18H0)" in odd
    assert "drop without Aggregate (L22H7)" in evidence("classified")


def test_verdicts_csv_holds_a_row_per_part_the_findings_print(tmp_path):
    topk_study(tmp_path, [270, 272, 268, 271, 269])
    section = {"function": "gna.report.findings.topk:topk",
               "options": {"name": "topk.csv", "claim": "c", "retrieval": ["mmlu"], "knowledge": ["knowledge"],
                           "answers": str(tmp_path / "answers" / "{model}" / "k{k}{draw}.answers.csv"),
                           "tasks": {"mmlu": ["t_mmlu"], "knowledge": ["t_kn"]}, "draws": [1, 2, 3, 4, 5]}}
    findings.make(tmp_path, tmp_path / "findings.md", [section], {"task_n": {"mmlu": N, "knowledge": N}})
    md = (tmp_path / "findings.md").read_text()
    table = pd.read_csv(tmp_path / "verdicts.csv")
    printed = re.findall(r"[;:] ([^;:]+?) [+-]\d\.\d\d \[[+-]\d\.\d\d, [+-]\d\.\d\d\] vs [<>] ", md)
    assert len(table) == len(printed) == 3 and list(table.part) == printed
    assert set(table.columns) >= {"claim", "model", "part", "estimate", "low", "high", "line", "paper",
                                  "detectable", "n", "paired", "verdict"}
    assert list(table.paired) == ["paired", "not a pair", "paired"]
    assert (tmp_path / "verdicts.png").is_file() and "![" in md.split("## ")[0]


def test_a_perplexity_is_printed_with_the_digits_its_table_has():
    # the real study's SmolLM2 LAMBADA: 152.3 in topk_removal.csv (four significant digits) was printed 152.30
    before = pd.Series({"lambada_ppl": 50.35})
    after = pd.Series({"lambada_ppl": 152.3, "random_lambada_ppl": 74.31, "random_lambada_ppl_min": 43.72,
                       "random_lambada_ppl_max": 101.6})
    text = topk_findings._perplexities(before, after, ["lambada"])
    assert text.startswith("lambada perplexity 50.35 -> 152.3 (random 74.31 [43.72, 101.6])")
    assert "152.30" not in text and "-> 5184 " in topk_findings._perplexities(
        before, pd.Series({"lambada_ppl": 5184.0}), ["lambada"]) + " "


def test_the_kv_control_is_judged_by_draw_where_each_draws_answers_are_kept(tmp_path):
    def kv_answers(draw: str, n_right: int):
        rows = [dict(task="kv_probe", filter="none", metric="acc", doc_id=i, item=f"kv{i}", target="0", chosen="",
                     answer="", value=v) for i, v in enumerate(right(n_right, 100))]
        path = tmp_path / "answers" / "m" / f"k4{draw}.answers.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)

    found = dict(answers=str(tmp_path / "answers" / "{model}" / "k{k}{draw}.answers.csv"), model="m",
                 draws=[1, 2, 3, 4, 5])
    after = pd.Series(dict(k=4, kv=20.0, random_kv=80.0, random_kv_min=78.0, random_kv_max=82.0, random_draws=5))
    st = with_settings({})
    kv_answers("", 20)
    for seed, r in zip(found["draws"], (78, 80, 82, 79, 81)):
        kv_answers(f"-random{seed}", r)
    works, shown = topk_findings._kv_control(after, st, found)
    assert works and "draw as the unit: t interval over 5 draws' paired differences, 4 df" in shown
    assert "KV control: random minus ranked KV at k 4 +0.60 [" in shown
    # a draw's answers missing: the table's points, said so, never judged at the draw level
    (tmp_path / "answers" / "m" / "k4-random5.answers.csv").unlink()
    works, shown = topk_findings._kv_control(after, st, found)
    assert works and "not judged at the draw level" in shown
