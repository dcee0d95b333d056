"""figures/findings.md's verdicts on small hand-made tables: n/a near chance, Fig. 2's shape, Table 1's
four conditions, top-k removal against the random-k control's spread, Fig. 4 and the distillation
beyond their spreads, SSM vs transformer redundancy at an equal share of heads; and the tables that
carry mean and spread (top-k with its random control, Fig. 4 over probe seeds, pooled random students)."""
import pandas as pd
import pytest

from gna.report import common, heads, hybrid_distillation, layer_swap, ssm_masking, topk
from gna.report.findings import head_scan as head_scan_findings
from gna.report.findings import heads as head_findings
from gna.report.findings import topk as topk_findings
from gna.report.findings import hybrid_distillation as distillation_findings
from gna.report.findings import pruning as pruning_findings


def write(folder, name, rows):
    pd.DataFrame(rows).to_csv(folder / name, index=False)
    return folder


def one(rows, model=None):
    hits = [r for r in rows if model is None or r["model"].startswith(model)]
    assert len(hits) == 1, rows
    return hits[0]


# --- the chance convention --------------------------------------------------------------------

def test_one_chance_convention():
    assert not hasattr(ssm_masking, "CHANCE") and not hasattr(layer_swap, "CHANCE")   # their chance lines: common's
    assert 100 * common.chance_of("mmlu") == 100 * common.CHANCE["mmlu"] == 25.0
    assert common.near_chance(0.34, 0.25) and not common.near_chance(0.36, 0.25)
    assert common.near_chance(34.0, 0.25, 100) and not common.near_chance(36.0, 0.25, 100)
    assert common.chance_of("mmlu", 0.2) == 0.2 and common.chance_of("swde") == 0.0


# --- Fig. 2: the shape ------------------------------------------------------------------------

def gradual_table(mmlu, minimal=None, model="m", knowledge=None):
    rows = []
    for d, v in enumerate(mmlu, start=1):
        row = dict(model=model, experiment="gradual", layers=f"0..{d - 1}", depth=d, mmlu=v,
                   knowledge=(knowledge or [0.9] * len(mmlu))[d - 1])
        if minimal is not None:
            row["minimal_depth"] = minimal
        rows.append(row)
    return rows


def test_fig2_holds_only_with_mmlu_held_down_to_the_minimal_depth_then_a_collapse(tmp_path):
    write(tmp_path, "layer_pruning.csv", gradual_table([0.26, 0.30, 0.88, 0.89, 0.90, 0.90], minimal=3))
    assert one(pruning_findings.gradual(tmp_path))["verdict"] == "holds"
    # no collapse below the minimal depth (0.80 at depth 2 loses 15% of the above-chance MMLU)
    write(tmp_path, "layer_pruning.csv", gradual_table([0.26, 0.80, 0.88, 0.89, 0.90, 0.90], minimal=3))
    r = one(pruning_findings.gradual(tmp_path))
    assert r["verdict"] == "partly" and "no collapse below the minimal depth" in r["evidence"]
    # the two ends alone look fine (0.90 -> 0.26), but MMLU falls as soon as a layer is cut
    write(tmp_path, "layer_pruning.csv", gradual_table([0.26, 0.27, 0.30, 0.50, 0.60, 0.90], minimal=6))
    r = one(pruning_findings.gradual(tmp_path))
    assert r["verdict"] == "does not hold" and "no layer can be cut" in r["evidence"]
    # a dip inside the held range, outside the tolerance
    write(tmp_path, "layer_pruning.csv", gradual_table([0.26, 0.30, 0.88, 0.70, 0.90, 0.90], minimal=3))
    r = one(pruning_findings.gradual(tmp_path, {"tolerance": 0.05}))
    assert r["verdict"] == "partly" and "leaves the tolerance" in r["evidence"]


def test_fig2_minimal_depth_falls_back_to_the_pruning_rule_and_reads_the_tolerance(tmp_path):
    write(tmp_path, "layer_pruning.csv", gradual_table([0.26, 0.30, 0.86, 0.89, 0.90, 0.90]))
    assert "minimal depth 4" in one(pruning_findings.gradual(tmp_path, {"tolerance": 0.02}))["evidence"]
    assert "minimal depth 3" in one(pruning_findings.gradual(tmp_path, {"tolerance": 0.05}))["evidence"]


def test_fig2_is_na_near_chance(tmp_path):
    write(tmp_path, "layer_pruning.csv", gradual_table([0.23, 0.30, 0.34], minimal=2))
    r = one(pruning_findings.gradual(tmp_path))
    assert r["verdict"] == "n/a" and "near chance" in r["evidence"]
    # the chance level is the config's
    assert one(pruning_findings.gradual(tmp_path, {"mmlu_chance": 0.1}))["verdict"] != "n/a"


# --- Table 1: four conditions ------------------------------------------------------------------

def keeping(tmp_path, mmlu, knowledge, source="discovered", minimal=(0.90, 0.95)):
    write(tmp_path, "layer_pruning.csv", gradual_table([0.25, 0.30, minimal[0], minimal[0]], minimal=3,
                                                       knowledge=[0.8, 0.9, minimal[1], minimal[1]]))
    rows = [dict(model="m", source=s, condition=c, gather="L2H1", aggregate="L3H0", kept="", mmlu=mmlu[c],
                 knowledge=knowledge[c]) for s in ([source] if isinstance(source, str) else source)
            for c in ("both", "aggregate_only", "gather_only", "neither")]
    write(tmp_path, "head_keeping.csv", rows)
    return head_findings.head_keeping(tmp_path)


GOOD_MMLU = {"both": 87.0, "aggregate_only": 26.0, "gather_only": 28.0, "neither": 25.0}
FLAT = {c: 95.0 for c in GOOD_MMLU}


def test_table1_holds_with_all_four_conditions_and_knowledge_in_each(tmp_path):
    rows = keeping(tmp_path, GOOD_MMLU, FLAT, source=["named", "discovered"])
    assert [r["verdict"] for r in rows] == ["holds", "holds"]
    assert {r["model"].split(" (")[1].split()[0] for r in rows} == {"named", "discovered"}


@pytest.mark.parametrize("mmlu,knowledge,failed", [
    ({**GOOD_MMLU, "both": 70.0}, FLAT, "both kept"),                        # both kept, far below the minimal
    ({**GOOD_MMLU, "gather_only": 60.0}, FLAT, "gather only"),               # one head alone keeps MMLU
    ({**GOOD_MMLU, "neither": 45.0}, FLAT, "neither"),                       # neither is not at chance
    (GOOD_MMLU, {**FLAT, "neither": 80.0}, "knowledge off the minimal model's in neither"),
])
def test_table1_names_the_condition_that_fails(tmp_path, mmlu, knowledge, failed):
    r = one(keeping(tmp_path, mmlu, knowledge))
    assert r["verdict"] in ("partly", "does not hold") and failed in r["evidence"].split("failed:")[1]


def test_table1_is_na_when_the_minimal_model_is_near_chance(tmp_path):
    assert one(keeping(tmp_path, GOOD_MMLU, FLAT, minimal=(0.33, 0.9)))["verdict"] == "n/a"


# --- top-k removal against the random-k control ------------------------------------------------

def topk_row(model, k, swde, knowledge, mmlu=80.0, random=None, draws=3):
    row = dict(model=model, k=k, mmlu=mmlu, swde=swde, knowledge=knowledge)
    if random:
        row["random_draws"] = draws
        for role, (m, lo, hi) in random.items():
            row.update({f"random_{role}": m, f"random_{role}_min": lo, f"random_{role}_max": hi})
    return row


def topk_verdict(tmp_path, rows):
    write(tmp_path, "topk.csv", rows)
    return topk_findings.topk(tmp_path, "topk.csv", "claim", ["mmlu", "gsm8k", "swde"], ["knowledge"])


def test_topk_holds_only_beyond_the_random_draws_spread_with_knowledge_kept(tmp_path):
    base = topk_row("m", 0, 100.0, 95.0, mmlu=80.0)
    far = {"mmlu": (78.0, 75.0, 80.0), "swde": (90.0, 80.0, 99.0)}
    r = one(topk_verdict(tmp_path, [base, topk_row("m", 1, 10.0, 94.0, mmlu=40.0, random=far)]))
    assert r["verdict"] == "holds" and "over 3 draws" in r["evidence"]
    # ranked below the random mean but not below every draw (one draw hurts as much): partly
    close = {"mmlu": (60.0, 35.0, 80.0), "swde": (60.0, 5.0, 99.0)}
    r = one(topk_verdict(tmp_path, [base, topk_row("m", 1, 10.0, 94.0, mmlu=40.0, random=close)]))
    assert r["verdict"] == "partly" and "not below every random draw" in r["evidence"]
    # a task ranked removal leaves alone (MMLU) does not veto the verdict: the retrieval mean decides
    flat_mmlu = {"mmlu": (80.0, 79.0, 81.0), "swde": (90.0, 80.0, 99.0)}
    assert one(topk_verdict(tmp_path, [base, topk_row("m", 1, 10.0, 94.0, mmlu=80.0, random=flat_mmlu)]))[
        "verdict"] == "holds"
    # beyond the spread, but knowledge falls
    r = one(topk_verdict(tmp_path, [base, topk_row("m", 1, 10.0, 80.0, mmlu=40.0, random=far)]))
    assert r["verdict"] == "partly" and "knowledge falls" in r["evidence"]
    # one draw: no spread to be beyond
    r = one(topk_verdict(tmp_path, [base, topk_row("m", 1, 10.0, 94.0, mmlu=40.0, random=far, draws=1)]))
    assert r["verdict"] == "partly"
    # random removal hurts more than ranked removal
    worse = {"mmlu": (30.0, 25.0, 35.0), "swde": (5.0, 0.0, 9.0)}
    assert one(topk_verdict(tmp_path, [base, topk_row("m", 1, 10.0, 94.0, mmlu=40.0, random=worse)]))[
        "verdict"] == "does not hold"


def test_topk_leaves_out_tasks_near_chance_and_is_na_when_all_are(tmp_path):
    base = topk_row("z", 0, 100.0, 95.0, mmlu=29.0)
    far = {"swde": (90.0, 80.0, 99.0)}
    r = one(topk_verdict(tmp_path, [base, topk_row("z", 1, 5.0, 95.0, mmlu=28.0, random=far)]))
    assert r["verdict"] == "holds" and "near chance: mmlu (29.0)" in r["evidence"]
    r = one(topk_verdict(tmp_path, [topk_row("z", 0, 1.0, 95.0, mmlu=29.0), topk_row("z", 1, 1.0, 95.0, mmlu=28.0)]))
    assert r["verdict"] == "n/a"


def tidy(model, k, scores, selection="ranked", draw=None, n_heads=24):
    rows = []
    for task, v in scores.items():
        metric = "acc" if task != "micro_swde" else "contains"
        rows.append(dict(model=model, k=k, task=task, metric=metric, value=v, selection=selection, draw=draw,
                         n_heads=n_heads))
    return rows


def test_topk_table_puts_the_random_mean_and_min_max_beside_ranked(monkeypatch):
    monkeypatch.setattr(topk, "published", lambda name: pd.DataFrame(columns=["model", "heads_removed", "metric",
                                                                              "value"]))
    rows = (tidy("m", 0, {"micro_mmlu": 0.9, "micro_swde": 1.0}) + tidy("m", 1, {"micro_mmlu": 0.4, "micro_swde": 0.1})
            + tidy("m", 1, {"micro_mmlu": 0.8, "micro_swde": 0.9}, "random", 1)
            + tidy("m", 1, {"micro_mmlu": 0.7, "micro_swde": 0.6}, "random", 2)
            + tidy("m", 1, {"micro_mmlu": 0.9, "micro_swde": 0.9}, "random", 3))
    table = topk.topk_table({"m": pd.DataFrame(rows)}, {"mmlu": ["micro_mmlu"], "swde": ["micro_swde"]}, {}, "x")
    assert list(table.k) == [0, 1] and table.heads_pct.tolist() == pytest.approx([0, 100 / 24])
    r = table.set_index("k").loc[1]
    assert r.mmlu == pytest.approx(40) and r.random_draws == 3
    assert (r.random_mmlu, r.random_mmlu_min, r.random_mmlu_max) == pytest.approx((80, 70, 90))
    assert (r.random_swde, r.random_swde_min, r.random_swde_max) == pytest.approx((80, 60, 90))
    md = topk.topk_markdown(table)
    assert md.set_index("k").loc[1, "random_swde"] == "80.0 [60.0, 90.0]"


# --- Fig. 4 over probe seeds ------------------------------------------------------------------

def kv_rows(model, cond, acc_by_pairs, head="L1H0"):
    return [dict(model=model, condition=cond, head=head if cond != "full" else "none", task=f"kv_n{n}_s{s}",
                 metric="acc", value=v, n_pairs=n, probe_seed=s)
            for n, accs in acc_by_pairs.items() for s, v in zip((1, 2, 3), accs)]


def test_kv_pairs_table_pairs_each_drop_with_the_full_model_on_the_same_probe_set():
    full = {2: [1.0, 0.9, 1.0], 16: [0.9, 0.8, 1.0]}
    no_agg = {2: [0.9, 0.9, 0.9], 16: [0.4, 0.6, 0.5]}
    table = heads.kv_pairs_table({"m": pd.DataFrame(kv_rows("m", "full", full) + kv_rows("m", "no_aggregate", no_agg))})
    r = table[(table.condition == "no_aggregate") & (table.n_pairs == 16)].iloc[0]
    assert (r.accuracy, r.accuracy_min, r.accuracy_max, r.probe_seeds) == pytest.approx((0.5, 0.4, 0.6, 3))
    # per probe seed 0.9 - 0.4, 0.8 - 0.6, 1.0 - 0.5 (unpaired extremes would give 0.6 and 0.2)
    assert (r["drop"], r.drop_min, r.drop_max) == pytest.approx((0.4, 0.2, 0.5))
    assert table[table.condition == "full"]["drop"].isna().all()


def test_fig4_needs_the_growth_beyond_the_probe_spread(tmp_path):
    full = {2: [1.0, 1.0, 1.0], 16: [1.0, 1.0, 1.0]}

    def verdict(no_agg):
        t = heads.kv_pairs_table({"m": pd.DataFrame(kv_rows("m", "full", full) + kv_rows("m", "no_aggregate", no_agg))})
        t.to_csv(tmp_path / "kv_pairs.csv", index=False)
        return one(head_findings.kv_pairs(tmp_path))

    assert verdict({2: [0.95, 0.95, 0.95], 16: [0.8, 0.8, 0.8]})["verdict"] == "holds"
    # the same mean growth (0.15), but one probe draw's drop at 16 pairs is below one at 2 pairs
    r = verdict({2: [1.0, 0.95, 0.9], 16: [0.65, 0.95, 0.8]})
    assert r["verdict"] == "partly" and "within the probe spread" in r["evidence"]
    assert verdict({2: [0.8, 0.8, 0.8], 16: [0.9, 0.9, 0.9]})["verdict"] == "does not hold"


def test_fig4_is_na_when_the_full_model_does_not_retrieve(tmp_path):
    full = {2: [0.55, 0.5, 0.6], 16: [0.1, 0.05, 0.1]}
    t = heads.kv_pairs_table({"m": pd.DataFrame(kv_rows("m", "full", full)
                                                + kv_rows("m", "no_aggregate", {2: [0.5] * 3, 16: [0.0] * 3}))})
    t.to_csv(tmp_path / "kv_pairs.csv", index=False)
    assert one(head_findings.kv_pairs(tmp_path))["verdict"] == "n/a"


# --- hybrid distillation: draws of random students --------------------------------------------

def student(variant, sel, k, kv, draw=None, heads_="L0H1", knowledge=95.0):
    return dict(variant=variant, selection=sel, k=k, state_size=16, draw=draw, knowledge_avg=knowledge,
                kv_retrieval=kv, kv_retrieval_min=kv - 1, kv_retrieval_max=kv + 1, probe_seeds=3, heldout_ppl=2.0,
                kept_heads=heads_)


def test_random_students_pool_into_mean_and_min_max_over_draws():
    ours = pd.DataFrame([student("k1-s16-ranked", "ranked", 1, 99.0),
                         student("k1-s16-random1", "random", 1, 20.0, 1, "L3H2"),
                         student("k1-s16-random2", "random", 1, 50.0, 2, "L1H1"),
                         student("k1-s16-random3", "random", 1, 80.0, 3, "L0H1")])
    pooled = hybrid_distillation.pool_draws(ours)
    r = pooled[pooled.selection == "random"].iloc[0]
    assert len(pooled) == 2 and r.variant == "k1-s16-random" and r.draws == 3
    assert (r.kv_retrieval, r.kv_retrieval_min, r.kv_retrieval_max) == pytest.approx((50, 20, 80))
    assert r.kept_heads == "1: L3H2; 2: L1H1; 3: L0H1" and "draw" not in pooled
    ranked = pooled[pooled.selection == "ranked"].iloc[0]
    assert (ranked.kv_retrieval_min, ranked.kv_retrieval_max) == (98.0, 100.0)   # its probe seeds' spread


def distill_table(ranked_kv, random_kvs):
    ours = pd.DataFrame([student("k0-s16-ranked", "ranked", 0, 12.0, heads_="none"),
                         student("k1-s16-ranked", "ranked", 1, ranked_kv)]
                        + [student(f"k1-s16-random{d}", "random", 1, v, d) for d, v in enumerate(random_kvs, 1)]
                        + [student("teacher", "teacher", 8, 100.0, heads_="all")])
    return hybrid_distillation.pool_draws(ours).assign(source="ours")


def test_ranked_heads_beat_random_ones_only_beyond_every_draw():
    def verdict(ranked_kv, random_kvs):
        rows = distillation_findings.distillation_findings(distill_table(ranked_kv, random_kvs), None)
        return next(r for r in rows if "random heads" in r["claim"])

    assert verdict(100.0, [20.0, 50.0, 80.0])["verdict"] == "holds"
    r = verdict(90.0, [20.0, 50.0, 95.0])    # above the mean, not above the best draw
    assert r["verdict"] == "partly" and "[20.0, 95.0] over 3 draws" in r["evidence"]
    assert verdict(12.0, [20.0, 50.0, 95.0])["verdict"] == "does not hold"
    assert verdict(100.0, [20.0])["verdict"] == "partly"   # one draw: no spread


def test_distillation_claims_are_na_when_the_teacher_does_not_retrieve():
    t = distill_table(100.0, [20.0, 50.0, 80.0])
    t.loc[t.selection == "teacher", "kv_retrieval"] = 5.0
    assert [r["verdict"] for r in distillation_findings.distillation_findings(t, None)] == ["n/a"]


# --- SSM vs transformer redundancy at an equal share of heads ----------------------------------

def ranking(model, kind, drops, per_layer):
    return pd.DataFrame([dict(model=model, layer=i // per_layer, head=i % per_layer, kind=kind, drop=d, rank=i + 1)
                         for i, d in enumerate(drops)])


def test_redundancy_compares_the_same_share_of_each_models_heads(tmp_path):
    # 20 attention heads, 4 per layer; 40 SSM heads, 8 per layer: 10% = the top 2 vs the top 4
    att = ranking("att", "attention", [0.5, 0.1] + [0.0] * 18, 4)
    paths = {}
    for name, df in (("att", att), ("ssm", ranking("ssm", "mamba2", [0.3, 0.2, 0.2, 0.2] + [0.0] * 36, 8))):
        df.to_csv(tmp_path / f"{name}.csv", index=False)
        paths[name] = tmp_path / f"{name}.csv"
    r = one(head_scan_findings.redundancy(tmp_path, rankings=paths))
    # the SSM's top head matters less (0.3 < 0.5), but its top 10% of heads carry more (0.9 > 0.6)
    assert r["verdict"] == "partly"
    assert "att 0.60 (2 of 20 heads, 4 per layer)" in r["evidence"] and "ssm 0.90 (4 of 40 heads" in r["evidence"]
    ranking("ssm", "mamba2", [0.2, 0.1, 0.1, 0.1] + [0.0] * 36, 8).to_csv(paths["ssm"], index=False)
    assert one(head_scan_findings.redundancy(tmp_path, rankings=paths))["verdict"] == "holds"


# --- on a sampled benchmark: n, intervals, and "not resolved" within them -----------------------

def test_a_sampled_accuracy_prints_its_count_and_interval_and_a_drop_its_newcombe_interval():
    from gna.report.findings.sampled import acc, count, drop_interval

    assert acc(40 / 91, 91) == "0.44 (40/91, 0.34-0.55)" and acc(0.44, None) == "0.44"
    assert count(43.96 / 100, 91) == 40                       # a table's rounded percent
    with pytest.raises(ValueError):
        count(0.5, 91)                                         # 45.5 of 91: not a count
    d, low, high = drop_interval(40 / 91, 23 / 91, 91)         # .44 -> .25: beyond the interval
    assert low > 0 and low < d < high
    d, low, high = drop_interval(40 / 91, 33 / 91, 91)         # .44 -> .36: within it
    assert low < 0 < high
    # Newcombe's hybrid score interval, method 10 (Newcombe 1998, Table II, 56/70 - 48/80): .0524 to .3339
    from gna.report.findings.sampled import wilson
    import math
    (la, ua), (lb, ub) = wilson(56, 70), wilson(48, 80)
    lo = 0.2 - math.sqrt((0.8 - la) ** 2 + (ub - 0.6) ** 2)
    hi = 0.2 + math.sqrt((ua - 0.8) ** 2 + (0.6 - lb) ** 2)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)


def test_fig2_on_a_sample_holds_only_beyond_the_interval(tmp_path):
    def verdict(n, counts, **extra):
        write(tmp_path, "layer_pruning.csv", gradual_table([c / n for c in counts], minimal=3,
                                                           knowledge=[n // 3 / n] * len(counts)))
        return one(pruning_findings.gradual(tmp_path, {"mmlu_n": n, "paper_beside": True, **extra}))

    # full .44, minimal depth 3, .25 below it: the collapse is beyond its interval, but "MMLU held
    # within 0.05" cannot be shown on 91 questions (80% power needs a 0.20 difference there, 0.23 for
    # the collapse at the level of a pick among the 4 cut depths)
    r = verdict(91, [23, 23, 40, 40, 40])
    assert r["verdict"] == "not resolved (underpowered: smallest detectable effect 0.23)"
    assert "98.8% interval: the extreme of 4, Bonferroni-adjusted" in r["evidence"]
    assert "(40/91, 0.34-0.55)" in r["evidence"] and "drop +0.19 [" in r["evidence"]
    assert "Llama-3.1-8B (paper)" in r["evidence"] and "(collapse) +0.19 [" in r["evidence"]
    # the same shape on 4,000 questions: both parts beyond their lines
    assert verdict(4000, [1000, 1000, 1760, 1760, 1760])["verdict"] == "holds"
    # the same shape with a drop of 8 answers of 91: past the collapse threshold, within the interval
    assert verdict(91, [28, 28, 36, 36, 36], collapse=0.5)["verdict"].startswith("not resolved")
    write(tmp_path, "layer_pruning.csv", gradual_table([28 / 91, 28 / 91, 36 / 91, 36 / 91, 36 / 91], minimal=3))
    assert one(pruning_findings.gradual(tmp_path, {"collapse": 0.5}))["verdict"] == "holds"   # unsampled: thresholds only


def test_table1_on_a_sample_holds_only_beyond_the_interval(tmp_path):
    n = 910   # 'both kept within 5 points of the minimal model' needs an interval that narrow
    pct = {c: 100 * k / n for c, k in {"both": 400, "aggregate_only": 230, "gather_only": 240, "neither": 220}.items()}
    flat = {c: 100 * 330 / n for c in pct}
    write(tmp_path, "layer_pruning.csv", gradual_table([0.25, 0.30, 400 / n, 400 / n], minimal=3,
                                                       knowledge=[0.3, 0.33, 330 / n, 330 / n]))
    rows = [dict(model="m", source="discovered", condition=c, gather="L2H1", aggregate="L3H0", kept="", mmlu=pct[c],
                 knowledge=flat[c]) for c in pct]
    write(tmp_path, "head_keeping.csv", rows)
    # knowledge kept within .07 (knowledge_margin .07 / .363 of its above-chance .363; the largest of four
    # conditions, its interval at 98.75%)
    r = one(head_findings.head_keeping(tmp_path, {"mmlu_n": n, "knowledge_margin": 0.07 * n / 330}))
    assert r["verdict"] == "holds" and "n = 910 questions" in r["evidence"]
    close = {**pct, "both": 100 * 320 / n}         # 320 vs 240 of 910: 9 points, within the interval
    write(tmp_path, "head_keeping.csv", [{**row, "mmlu": close[row["condition"]]} for row in rows])
    assert one(head_findings.head_keeping(tmp_path, {"mmlu_n": n, "tolerance": 0.1}))["verdict"].startswith("not resolved")


def test_knowledge_at_chance_makes_knowledge_stays_no_result(tmp_path):
    """Where the minimal model's knowledge is near the knowledge tasks' chance, "knowledge stays"
    cannot fail: Fig. 3 and Table 1 say so and do not call it 'holds' (knowledge_chance set)."""
    n = 910   # knowledge kept within 5 points needs an interval that narrow

    def pruning(knowledge):   # minimal depth 3 (MMLU 620/910); removing L0 collapses it to 210/910
        rows = gradual_table([0.25, 0.30, 620 / n, 620 / n], minimal=3, knowledge=[knowledge] * 4)
        rows += [dict(model="m", experiment="minimal (0..2) minus layer", layers=f"L{i}", layer=i, mmlu=v,
                      knowledge=knowledge) for i, v in enumerate([210 / n, 610 / n, 600 / n])]
        write(tmp_path, "layer_pruning.csv", rows)

    pct = {c: 100 * k / n for c, k in {"both": 620, "aggregate_only": 230, "gather_only": 240, "neither": 220}.items()}
    # below its chance the margin (a share of the above-chance knowledge) is nothing: knowledge is not shown to
    # stay ("not resolved"), and the note says why
    for knowledge, chance, verdict in ((600 / n, 0.25, "holds"), (210 / n, None, "holds"),
                                       (210 / n, 0.25, "not resolved")):
        pruning(knowledge)
        write(tmp_path, "head_keeping.csv", [dict(model="m", source="discovered", condition=c, gather="L0H1",
                                                  aggregate="L1H0", kept="", mmlu=pct[c], knowledge=100 * knowledge)
                                             for c in pct])
        # knowledge kept within .05 of it: the margin's share of the above-chance knowledge
        settings = {"mmlu_n": n, "knowledge_chance": chance,
                    "knowledge_margin": min(1.0, 0.07 / max(knowledge - (chance or 0.0), 1e-9))}
        for r in (one(pruning_findings.individual(tmp_path, settings)),
                  one(head_findings.head_keeping(tmp_path, settings))):
            assert r["verdict"] == verdict, r
            assert ("that it stays cannot fail" in r["evidence"]) == (verdict != "holds")
