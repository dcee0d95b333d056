"""The real-model preset (workflow/configs/real.yaml): its DAG, its own figures folder, the local MMLU
tasks every evaluation reads, the per-model scan method, and its cost in the plan."""
import re
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from gna.config.schema import with_defaults
from gna.plan import Hardware, dag_jobs
from gna.plan.cpu_hours import cpu_hour_lines, cpu_hours, is_cpu_study
from gna.plan.job_estimates import evaluation, head_scan
from gna.plan.jobs import Study, local_task_docs
from gna.plan.scan_methods import cpu_hardware

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "workflow/configs/real.yaml"
SMOL, QWEN = "smollm2-135m", "qwen2.5-coder-1.5b"


@lru_cache(maxsize=1)
def real_config() -> dict:
    return with_defaults(yaml.safe_load(REAL.read_text()))


@lru_cache(maxsize=1)
def real_jobs():
    return dag_jobs(real_config(), workdir=ROOT)


def dry_run(*args, targets=()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(ROOT),
                           "--dry-run", "--forceall", "--nolock", *args, "--", *targets],
                          capture_output=True, text=True)


def test_the_preset_runs_the_papers_transformer_experiments_on_both_models():
    count = Counter(rule for rule, _ in real_jobs())
    per_model = Counter((rule, wc.get("model")) for rule, wc in real_jobs())
    # Fig. 2 / Fig. 3: every depth and every layer of Qwen (28 layers); SmolLM2, at chance on MMLU's letter,
    # has no collapse to show (n/a by construction)
    assert per_model["gradual_pruning", SMOL] == per_model["individual_pruning", SMOL] == 0
    assert per_model["gradual_pruning", QWEN] == per_model["individual_pruning", QWEN] == 28
    # the KV scan of both, Table 1's head search and keeping on Qwen (SmolLM2 is at chance on MMLU)
    assert per_model["head_scan", SMOL] == 2 and per_model["head_scan", QWEN] == 1   # SmolLM2: exact and fast
    assert count["critical_heads"] == 1 and per_model["critical_heads", QWEN] == 1
    # Table 1 both ways: the MMLU search's heads and the KV scan's top Gather and Aggregate-pattern heads
    assert per_model["head_keeping", QWEN] == 4 + 4
    # Fig. 4, top-k removal beside random heads, the heatmaps and the explorer
    assert per_model["kv_pairs", SMOL] == per_model["kv_pairs", QWEN] == 3
    # top-k at the slides' shares (Qwen k = 3, 7, 10; SmolLM2 3, 5, 8), k = 0 once, five random draws a k
    assert per_model["topk_removal", QWEN] == per_model["topk_removal", SMOL] == 1 + 3 * (1 + 5)
    assert count["ga_heatmaps"] == 1 and count["head_explorer"] == 2
    ks = {(wc["model"], int(wc["k"])) for rule, wc in real_jobs() if rule == "topk_removal"}
    assert ks == {(m, k) for m, kk in ((QWEN, (0, 3, 7, 10)), (SMOL, (0, 3, 5, 8))) for k in kk}
    # the fetched checkpoints and the local tasks come first
    assert {"local_mmlu", "findings"} <= set(count)


def test_the_preset_writes_its_own_figures_folder_and_the_default_study_keeps_figures():
    real = dry_run("--configfile", str(REAL), targets=["figures/real/findings.md"])
    assert real.returncode == 0, real.stderr[-2000:]
    assert "figures/real/layer_pruning.csv" in real.stdout and "figures/real/head_keeping.md" in real.stdout
    assert " figures/layer_pruning.csv" not in real.stdout
    # every table and the findings it writes are committed, so check_figures holds each one; except
    # verdicts.csv, which the findings write from the real study's per-item answers, not in the
    # repository, and the confirmation's words and table (docs/confirmation.md), which need the screen
    # rerun and the fresh items scored: the study's next run writes them (and check_figures then holds them)
    pending = {"figures/real/verdicts.csv", "figures/real/confirmation.md", "figures/real/confirmation_verdicts.csv"}
    written = set(re.findall(r"figures/real/[\w./-]+\.(?:csv|md)", real.stdout)) - pending
    assert len(written) >= 8 and not [f for f in written if not (ROOT / f).is_file()]
    micro = dry_run(targets=["figures/findings.md"])
    assert micro.returncode == 0 and "figures/real/" not in micro.stdout


@pytest.mark.parametrize("folder", ["../elsewhere", "/tmp/figures", "figures/../../x"])
def test_a_figures_folder_outside_the_working_directory_is_refused(folder):
    out = dry_run("--config", f"figures={folder}")
    assert out.returncode != 0
    assert "figures" in out.stderr and "Traceback" not in out.stderr


def test_every_evaluation_reads_the_local_mmlu_sample():
    out = dry_run("--configfile", str(REAL), targets=["results/pruning/qwen2.5-coder-1.5b/gradual/depth3.csv"])
    assert out.returncode == 0, out.stderr[-2000:]
    # a model's depths run in one job (gna.experiments.shared_conditions)
    job = re.split(r"rule batch_gradual_pruning_\d+:", out.stdout)[1].split("\n\n")[0]
    assert "results/benchmarks/mmlu/tasks/mmlu_sample.jsonl" in job
    assert "rule local_mmlu:" in out.stdout


def test_local_mmlu_dir_in_eval_builds_the_task_suite(tmp_path, mmlu_jsonl, tiny_model_dir):
    """A job's eval settings naming the local MMLU folder are enough for evaluation_rows to score it."""
    from gna.evaluation.local_mmlu import build
    from gna.experiments.run import evaluation_rows

    build(mmlu_jsonl, tmp_path / "tasks", size=91, seed=0)
    spec = {"path": tiny_model_dir("llama"), "dtype": "float32", "device": "cpu"}
    eval_cfg = {"batch_size": 8, "max_length": 512, "limit": None, "chat_tasks": [], "num_fewshot": 0,
                "add_bos_token": None, "fewshot_as_multiturn": False, "task_definitions": "installed",
                "local_mmlu_dir": str(tmp_path / "tasks")}
    rows = evaluation_rows(spec, ["mmlu_local"], [], eval_cfg, None, {"model": "tiny", "seed": 0})
    acc = rows[(rows.task == "mmlu_local") & (rows.metric == "acc")].iloc[0]
    assert acc.n == 91 and acc.ci_low <= acc.value <= acc.ci_high


def test_the_scan_method_is_per_model():
    cfg, hw = real_config(), cpu_hardware(Hardware())   # on a core, where the scan's FLOPs dominate
    assert cfg["scan"]["method"] == "atp+exact" and cfg["scan"]["method_by_model"] == {SMOL: "exact"}
    s = Study(cfg, hw)
    exact = head_scan(s, {"model": SMOL}).hours
    fast = head_scan(Study({**cfg, "scan": {**cfg["scan"], "method_by_model": {}}}, hw), {"model": SMOL}).hours
    assert exact > 2 * fast   # SmolLM2 ablates all 270 heads, not the estimate's top ones


def test_an_unknown_model_in_method_by_model_is_refused_in_one_line():
    out = dry_run("--configfile", str(REAL), "--config", "scan={method_by_model: {nosuch: exact}}")
    assert out.returncode != 0 and "scan.method_by_model names 'nosuch'" in out.stderr


def test_the_plan_states_the_cpu_hours_per_model_and_one_gpus():
    cfg, jobs = real_config(), real_jobs()
    assert is_cpu_study(cfg) and not is_cpu_study(with_defaults(yaml.safe_load(
        (ROOT / "workflow/configs/paper.yaml").read_text())))
    rows = cpu_hours(cfg, jobs)
    models = {r["model"] for r in rows}
    assert {SMOL, QWEN} <= models
    by = {(r["model"], r["rule"]): r for r in rows}
    assert by[QWEN, "gradual_pruning"]["jobs"] == 28
    # Qwen (1.5B) costs more than SmolLM2 (135M) per job, and a GPU in the same machine is faster than a
    # core on every job that computes: its start-up is the CPU job's, not a cluster job's 2 min
    assert by[QWEN, "topk_removal"]["cpu_h"] > 2 * by[SMOL, "topk_removal"]["cpu_h"]
    computing = {"gradual_pruning", "individual_pruning", "critical_heads", "head_keeping", "head_scan", "kv_pairs",
                 "topk_removal"}   # (the others load a model and draw: the same hours either way)
    assert all(r["gpu_h"] < r["cpu_h"] for r in rows if r["rule"] in computing)
    assert sum(r["gpu_h"] for r in rows) < sum(r["cpu_h"] for r in rows) / 5
    lines = "\n".join(cpu_hour_lines(rows, cores=2))
    assert "CPU core-hours" in lines and "on 2 cores" in lines and f"| **{QWEN}** |" in lines


def test_a_bf16_study_is_costed_at_the_bf16_rate():
    """The preset runs in bfloat16: its CPU hours at Hardware.cpu_gflops_bf16, float32's at cpu_gflops."""
    cfg, jobs, hw = real_config(), real_jobs(), Hardware()
    assert cfg["dtype"] == "bfloat16" and hw.cpu_gflops_bf16 > hw.cpu_gflops
    bf16 = {(r["model"], r["rule"]): r["cpu_h"] for r in cpu_hours(cfg, jobs)}
    fp32 = {(r["model"], r["rule"]): r["cpu_h"] for r in cpu_hours({**cfg, "dtype": "float32"}, jobs)}
    key = (QWEN, "individual_pruning")   # FLOPs dominate: the hours scale with the rate
    assert fp32[key] / bf16[key] == pytest.approx(hw.cpu_gflops_bf16 / hw.cpu_gflops, rel=0.1)
    assert f"{hw.cpu_gflops_bf16:g} GFLOP/s" in "\n".join(cpu_hour_lines(cpu_hours(cfg, jobs), cores=2, dtype="bfloat16"))


def test_the_local_samples_size_the_plans_evaluations():
    """The local tasks hold their samples (benchmarks.mmlu.size questions, benchmarks.suite.size documents
    a task): twice the samples, about twice the hours."""
    cfg = real_config()
    bench = cfg["benchmarks"]
    big = {**cfg, "benchmarks": {"mmlu": {**bench["mmlu"], "size": 2 * bench["mmlu"]["size"]},
                                 "suite": {**bench["suite"], "size": {t: 2 * n for t, n in bench["suite"]["size"].items()}}}}
    core = cpu_hardware(Hardware())   # where the evaluation, not the loading, is the cost
    one = evaluation(Study(cfg, core), {"model": QWEN, "depth": "28"}, ["mmlu", "knowledge"], "depth").hours
    two = evaluation(Study(big, core), {"model": QWEN, "depth": "28"}, ["mmlu", "knowledge"], "depth").hours
    assert 1.6 < two / one < 2.05
    docs = local_task_docs(cfg)
    assert docs["mmlu_local"] == bench["mmlu"]["size"] and docs["hellaswag_local"] == bench["suite"]["size"]["hellaswag"]
    assert "bbh_local" not in docs and "bbh" not in bench["suite"]["tasks"]   # not built: no verdict reads it
    # a task left out of the sizes holds all its documents: the lm-eval task's size
    whole = {**cfg, "benchmarks": {**bench, "suite": {**bench["suite"], "size": {"arc_easy": 40}}}}
    assert "hellaswag_local" not in local_task_docs(whole) and local_task_docs(whole)["arc_easy_local"] == 40
    hella = evaluation(Study(whole, core), {"model": QWEN, "depth": "28"}, ["knowledge"], "depth").hours
    assert hella > 20 * evaluation(Study(cfg, core), {"model": QWEN, "depth": "28"}, ["knowledge"], "depth").hours


def test_the_fast_scan_is_held_to_the_exact_one_on_smollm2():
    per_model = Counter((rule, wc.get("model"), wc.get("scan_dir")) for rule, wc in real_jobs())
    assert per_model["head_scan", SMOL, "scan"] == per_model["head_scan", SMOL, "scan_fast"] == 1
    assert per_model["head_scan", QWEN, "scan_fast"] == 0
    assert ("scan_agreement", None, None) in per_model


def test_agreement_counts_the_exact_top_heads_the_fast_scan_finds():
    import pandas as pd

    from gna.scan.agreement import agreement

    heads = [(0, h, "attention") for h in range(6)]
    exact = pd.DataFrame([dict(layer=l, head=h, kind=k, rank=i + 1, drop=0.5 - 0.1 * i)
                          for i, (l, h, k) in enumerate(heads)])
    order = [0, 2, 1, 5, 3, 4]   # the fast scan swaps the 2nd and 3rd, and ranks the 6th 4th
    fast = pd.DataFrame([dict(layer=0, head=h, kind="attention", rank=i + 1, exact=i < 3,
                              drop=[0.5, 0.3, 0.4, float("nan"), float("nan"), float("nan")][i])
                         for i, h in enumerate(order)])
    got = agreement(exact, fast, ks=(1, 2, 3, 4)).set_index("k")
    assert list(got.recall) == [1.0, 0.5, 1.0, 0.75] and list(got.verified) == [1.0, 1.0, 1.0, 0.75]
    with pytest.raises(ValueError, match="same heads"):
        agreement(exact, fast.iloc[:5])
    assert got.beyond_noise_at_best.isna().all()   # no prompt count: nothing said


def test_agreement_says_how_many_exact_top_heads_could_be_beyond_noise():
    """SmolLM2's exact top drop is .09 of 100 prompts: even with all 9 changed prompts lost, McNemar's
    p = 2^-9 = .002 is above 5% / 270 heads. A drop of .2 (2^-20) is beyond it."""
    import pandas as pd

    from gna.scan.agreement import agreement, could_be_beyond_noise

    assert not could_be_beyond_noise(0.09, 100, 270) and could_be_beyond_noise(0.2, 100, 270)
    assert not could_be_beyond_noise(0.0, 100, 270)
    drops = [0.2, 0.15, 0.09, 0.05] + [0.0] * 266
    exact = pd.DataFrame([dict(layer=i // 9, head=i % 9, kind="attention", rank=i + 1, drop=d, n_examples=100)
                          for i, d in enumerate(drops)])
    got = agreement(exact, exact.assign(exact=True), ks=(1, 3, 5)).set_index("k")
    assert list(got.beyond_noise_at_best) == [1, 2, 2]


def test_check_models_must_be_ranked_exactly():
    out = dry_run("--configfile", str(REAL), "--config", "scan={check_models: [qwen2.5-coder-1.5b]}")
    assert out.returncode != 0 and "no exact ranking to hold the fast scan to" in out.stderr


def test_readme_and_manual_quote_the_real_findings():
    """The real models' findings in the manual are figures/real/findings.md's rows,
    verbatim; each MMLU accuracy there carries its count and interval, and the paper's Llama beside."""
    from gna.report.quote import REAL_FINDINGS, quoted, rows, table

    findings = (ROOT / REAL_FINDINGS.source).read_text()
    got = rows(findings, REAL_FINDINGS.prefix)
    assert {m.split(" ")[0] for _, m, _, _ in got} >= {SMOL, QWEN}
    # n and interval: "0.51 (76/150, 0.42-0.59)"
    assert "Llama-3.1-8B" in findings and re.search(r"\(\d+/150, 0\.\d\d-0\.\d\d\)", findings)
    for page in ("docs/real-models.md",):
        assert quoted((ROOT / page).read_text(), REAL_FINDINGS) == table(findings, REAL_FINDINGS), \
            f"{page}: run python -m gna.report.quote"
