"""The real-model preset's budget and what it spends it on: the knowledge suite as knowledge, top-k at the
slides' shares of each model's heads with its random draws and its KV control, Fig. 4's heads by their
pattern, and a plan that states the study's CPU core-hours beside its budget and refuses a study over it."""
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gna.config.schema import with_defaults
from gna.errors import ConfigError
from gna.experiments.head_selection import pattern_head
from gna.experiments.topk import k_list, k_of_share
from gna.plan import dag_jobs
from gna.plan.cpu_hours import budget_lines, check_budget, cpu_hours

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "workflow/configs/real.yaml"
SMOL, QWEN = "smollm2-135m", "qwen2.5-coder-1.5b"
SUITE_KNOWLEDGE = ["arc_easy_local", "arc_challenge_local", "piqa_local", "winogrande_local", "openbookqa_local",
                   "hellaswag_local"]


@lru_cache(maxsize=1)
def real():
    cfg = with_defaults(yaml.safe_load(REAL.read_text()))
    return cfg, dag_jobs(cfg, workdir=ROOT, on_demand=True)


def test_the_preset_fits_its_stated_budget_and_the_plan_says_so():
    cfg, jobs = real()
    budget = cfg["budget"]["cpu_core_hours"]
    assert budget == 24
    rows = cpu_hours(cfg, jobs)
    total = sum(r["cpu_h"] for r in rows if not r["on_demand"])
    assert 0.5 * budget < total <= budget   # spent, not left idle
    # the baselines (on demand, outside `all`) are sized beside the study but are not in its budget
    apart = [r for r in rows if r["on_demand"]]
    assert {r["rule"] for r in apart} == {"baseline"} and sum(r["cpu_h"] for r in apart) > 0
    check_budget(rows, budget)
    line = "\n".join(budget_lines(rows, budget))
    assert f"{total:,.1f} of 24 CPU core-hours" in line and "budget.cpu_core_hours" in line
    assert "On-demand targets" in line


def test_a_study_over_its_budget_is_refused_naming_its_costliest_work():
    rows = [{"model": "m", "rule": "gradual_pruning", "cpu_h": 3.0}, {"model": "m", "rule": "kv_pairs", "cpu_h": 1.5}]
    check_budget(rows, 4.5)
    check_budget(rows, None)   # no budget stated: nothing to hold it to
    with pytest.raises(ConfigError, match=r"budget.cpu_core_hours = 4, but the study takes 4.5 CPU core-hours; "
                                          r"its costliest: m gradual_pruning 3.0 h, m kv_pairs 1.5 h"):
        check_budget(rows, 4)
    assert "none stated" in "\n".join(budget_lines(rows, None))


@pytest.mark.slow
def test_the_plan_target_refuses_the_preset_under_a_smaller_budget(tmp_path):
    cfg = yaml.safe_load(REAL.read_text())
    cfg["budget"] = {"cpu_core_hours": 5}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                          "--cores", "1", "--configfile", str(tmp_path / "c.yaml"), "--", "plan"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "budget.cpu_core_hours = 5, but the study takes" in out.stdout + out.stderr
    assert not (tmp_path / "results/plan/plan.md").exists()


def test_knowledge_is_the_six_task_suite_and_topk_reads_the_retrieval_tasks():
    cfg, jobs = real()
    assert cfg["tasks"]["knowledge"] == SUITE_KNOWLEDGE
    assert set(cfg["tasks"]["retrieval"].values()) <= {"lambada_openai_local", "gsm8k_local", "bbh_local"}
    assert "lambada_openai_local" in cfg["tasks"]["retrieval"].values()
    # the suite's tasks are built before any evaluation reads them
    assert any(rule == "local_suite" for rule, _ in jobs)


@pytest.mark.parametrize("heads, ks", [(1024, [0, 10, 20, 30]), (336, [0, 3, 7, 10]), (270, [0, 3, 5, 8]),
                                       (512, [0, 5, 10, 15]), (30, [0, 1, 1, 1])])
def test_k_is_the_slides_share_of_the_models_heads_rounded_to_the_nearest(heads, ks):
    shares = [0, 10 / 1024, 20 / 1024, 30 / 1024]
    assert [k_of_share(s, heads) for s in shares] == ks
    assert k_list(shares, heads, "m") == list(dict.fromkeys(ks))   # equal k once


def test_k_rounds_halves_up_and_refuses_what_is_no_share():
    assert k_of_share(0.5, 5) == 3 and k_of_share(0.1, 25) == 3 and k_of_share(0.1, 24) == 2
    with pytest.raises(ConfigError, match="not a share"):
        k_of_share(1.5, 10)
    with pytest.raises(ConfigError, match="needs the number of heads of 'm'"):
        k_list([0.1], None, "m")


def test_fig4s_aggregate_head_by_its_pattern_is_the_top_one_whose_pattern_is_aggregate():
    # ranks as Qwen's scan: L22H7 reads as an Aggregate head but lost the label to the noise test
    ga = pd.DataFrame({"rank": [1, 2, 3, 9], "layer": [18, 15, 16, 22], "head": [0, 10, 3, 7],
                       "kind": ["attention"] * 4, "gather_score": [0.361, 0.46, 0.12, 0.019],
                       "aggregate_score": [0.011, 0.006, 0.105, 0.384], "role": ["gather", "gather", "-", "-"]})
    assert pattern_head(ga, "aggregate", 0.3) == [22, 7, "attention"]
    assert pattern_head(ga, "gather", 0.3) == [18, 0, "attention"]
    assert pattern_head(ga, "aggregate", 0.4) is None
    # a tie goes to aggregate, as the classification's
    tie = ga.assign(gather_score=[0.5, 0.0, 0.0, 0.0], aggregate_score=[0.5, 0.0, 0.0, 0.0])
    assert pattern_head(tie, "aggregate", 0.3) == [18, 0, "attention"] and pattern_head(tie, "gather", 0.3) is None


def test_topk_removal_scores_its_kv_control_on_other_prompts_than_the_ranking():
    cfg, _ = real()
    assert cfg["experiments"]["topk_removal"]["kv_control"] and len(cfg["experiments"]["topk_removal"]["random_draws"]) >= 5
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(ROOT),
                          "--dry-run", "--forceall", "--nolock", "--configfile", str(REAL), "--",
                          f"results/topk_removal/{QWEN}/k3-random2.csv"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    block = out.stdout[out.stdout.index("rule batch_topk_removal"):]
    first = block[:block.index("\n\n")] if "\n\n" in block else block
    # the scan's n_pairs (10), kv_probe.seed + 1: not the prompts the heads were ranked on (seed 0)
    assert "results/probes/kv-paper-n10-s1-nosep-v10-99.examples.jsonl" in first
    assert "kv-paper-n10-s0-" not in first
    # and it reads the knowledge suite's built tasks: it runs after them, and again when they change
    assert "results/benchmarks/suite/tasks/manifest.json" in first


def test_the_mmlu_sample_sees_fig2s_collapse_scaled_to_qwen_with_80_percent_power():
    """The preset's MMLU size is chosen by power: Fig. 2's fall to chance, as a share of the paper's
    above-chance MMLU, on Qwen's letter accuracy at the committed full depth (its largest), is detected by
    the paired test at 5% with 80% power (answers taken as independent: the conservative n)."""
    from gna.evaluation.power import paired_n
    from gna.report.findings.paper import effect

    cfg, _ = real()
    table = pd.read_csv(ROOT / "figures/real/layer_pruning.csv")
    qwen = table[(table.model == QWEN) & (table.experiment == "gradual")]
    base = float(qwen.loc[qwen.depth.idxmax(), "mmlu"])
    collapse = effect("fig2_collapse").scaled(base, 0.25)
    assert 0.15 < collapse < 0.3
    assert cfg["benchmarks"]["mmlu"]["size"] >= paired_n(collapse, base=base)
