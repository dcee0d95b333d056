"""The Snakemake workflow end to end on the smoke preset, in a scratch working directory."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def run(workdir, *args, config=None, check=True):
    env = {**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [*SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(config or ROOT / "workflow/configs/smoke.yaml"), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if check and out.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def planned_jobs(out) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> count (a rule's batches, ``batch_<rule>_<i>``, as
    ``batch_<rule>``)."""
    jobs, table = {}, False
    for line in out.stdout.splitlines():
        parts = line.split()
        if line.startswith("job ") and "count" in line:
            table = True
        elif table and len(parts) == 2 and parts[1].isdigit():
            if parts[0] == "total":
                break
            name = re.sub(r"^batch_(.+)_\d+$", r"batch_\1", parts[0])
            jobs[name] = jobs.get(name, 0) + int(parts[1])
    return jobs


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("smoke")
    run(work, "--cores", "2")
    return work


def test_smoke_preset_runs_end_to_end(smoke_run):
    ranking = pd.read_csv(smoke_run / "results/scan/llama-tiny.ranking.csv")
    assert len(ranking) == 12 and list(ranking["rank"]) == list(range(1, 13))
    ga = pd.read_csv(smoke_run / "results/scan/zamba2-tiny.ga.csv")
    assert {"gather_score", "aggregate_score", "role"} <= set(ga.columns) and len(ga) == 3
    figures = {"head_ranking", "gradual_pruning", "individual_pruning", "kv_pairs", "topk_removal", "ga_heatmaps"}
    for name in figures:
        for ext in ("png", "pdf"):
            assert (smoke_run / "figures" / f"{name}.{ext}").stat().st_size > 0
    for table in ("head_ranking", "layer_pruning", "head_keeping", "kv_pairs", "topk_removal", "arc_chat",
                  "inference_memory"):
        assert (smoke_run / "figures" / f"{table}.csv").is_file() and (smoke_run / "figures" / f"{table}.md").is_file()
    assert "## Fig. 2" in (smoke_run / "figures/findings.md").read_text()
    keeping = pd.read_csv(smoke_run / "figures/head_keeping.csv")
    assert set(keeping.condition) == {"both", "gather_only", "aggregate_only", "neither"}
    rows = pd.read_csv(smoke_run / "results/topk_removal/zamba2-tiny/k2.csv")
    assert {"model", "intervention", "task", "metric", "value", "seed", "config_hash", "v_torch"} <= set(rows.columns)
    assert "head scan" in (smoke_run / "logs/scan/llama-tiny.log").read_text()  # progress went to the log
    for model in ("llama-tiny", "mamba2-tiny", "zamba2-tiny"):  # the head explorer, each beside the others
        page = (smoke_run / f"figures/explorer/{model}.html").read_text()
        assert page.count('"name":"') == 3 and "gna-data" in page
    for name in ("ssm_masking", "layer_swap", "hybrid_heads"):
        for ext in ("png", "pdf"):
            assert (smoke_run / "figures" / f"{name}.{ext}").stat().st_size > 0
    for table in ("ssm_masking", "hybrid_attention", "layer_swap", "hybrid_heads", "hybrid_state_size"):
        assert (smoke_run / "figures" / f"{table}.csv").is_file() and (smoke_run / "figures" / f"{table}.md").is_file()
    stage3 = smoke_run / "results/hybrid/llama-tiny/k2-s8-ranked/stage3"
    assert (stage3 / "model.safetensors").is_file() and json.loads((stage3 / "distill.json").read_text())["steps"] == 2
    assert not list((smoke_run / "results/hybrid").rglob("*.ckpt"))  # removed once each stage's output is written
    heads = pd.read_csv(smoke_run / "figures/hybrid_heads.csv")
    assert set(heads.selection) == {"ranked", "random", "teacher"} and heads.kv_retrieval.notna().all()
    assert set(pd.read_csv(smoke_run / "figures/ssm_masking.csv").condition) == {"none", "full", "pattern"}


def test_html_report_bundles_the_figures(smoke_run):
    run(smoke_run, "--report", str(smoke_run / "report.html"))
    html = (smoke_run / "report.html").read_text(errors="replace")
    assert len(html) > 100_000 and "head_ranking.png" in html
    # it opens on what the study is (workflow/report/workflow.rst), findings first
    assert "Start with Findings" in html and "study of this run is" in html


def changed_config(tmp_path, edit) -> Path:
    cfg = yaml.safe_load((ROOT / "workflow/configs/smoke.yaml").read_text())
    edit(cfg)
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_rerun_has_nothing_to_do_and_a_param_change_reruns_only_its_experiment(smoke_run, tmp_path):
    assert planned_jobs(run(smoke_run, "-n", "--cores", "1")) == {}
    tolerance = changed_config(tmp_path, lambda c: c["experiments"]["layer_pruning"].update(tolerance=0.4))
    assert planned_jobs(run(smoke_run, "-n", "--cores", "1", config=tolerance)) == {
        "minimal_model": 1, "batch_individual_pruning": 1, "critical_layers": 1, "critical_heads": 1,
        "head_keeping": 4,
        "pruning_figures": 1, "head_keeping_table": 1, "findings": 1, "all": 1}
    arc = changed_config(tmp_path, lambda c: c["experiments"]["arc_chat"].update(k=[0, 1]))
    assert planned_jobs(run(smoke_run, "-n", "--cores", "1", config=arc)) == {
        "batch_topk_removal": 1, "topk_tables": 1, "findings": 1, "all": 1}


@pytest.mark.parametrize("edit,message", [
    (lambda c: c["scan"].update(models=["nope"]), "scan.models names 'nope'"),
    (lambda c: c["models"]["llama-tiny"]["random"].update(family="rwkv"), "rwkv"),
    (lambda c: c["kv_probe"].update(n_examples=-3), "-3"),
    (lambda c: c["scan"].update(n_pairs=500), "500"),
    (lambda c: c["experiments"]["topk_removal"].update(k=[0, 999]), "k = 999 but model"),
    (lambda c: c["tasks"].pop("mmlu"), "'mmlu' is a required property"),
    (lambda c: c["experiments"]["kv_pairs"].update(models=["mamba1-none"]), "mamba1-none"),
])
def test_bad_config_is_refused_before_any_job(tmp_path, edit, message):
    bad = changed_config(tmp_path, edit)
    out = run(tmp_path, "-n", "--cores", "1", config=bad, check=False)
    assert out.returncode != 0 and message in out.stdout + out.stderr
    assert not (tmp_path / "results").exists()


def test_paper_preset_builds_its_dag_offline(tmp_path):
    jobs = planned_jobs(run(tmp_path, "-n", "--cores", "1", config=ROOT / "workflow/configs/paper.yaml"))
    # 7 G&A scans + the distilled teacher's on the follow-up's separator (results/scan_distill)
    # a model's depths (32 + 64 + 32) in one job, its removals in another (gna.experiments.shared_conditions)
    assert jobs["head_scan"] == 8 and jobs["batch_gradual_pruning"] == jobs["batch_individual_pruning"] == 3
    # slide tables (Zamba2 k lists) + ARC chat, one job per model and experiment
    assert jobs["batch_topk_removal"] == 7 and "topk_removal" not in jobs
    out = run(tmp_path, "-n", "--cores", "1", "--rerun-triggers", "mtime", config=ROOT / "workflow/configs/paper.yaml")
    scan = out.stdout.split("rule head_scan:", 1)[1].split("rule ", 1)[0]
    assert "gpu=1" in scan
    probe = out.stdout.split("rule kv_probe:", 1)[1].split("rule ", 1)[0]
    assert "gpu" not in probe
    # students: 5 ranked k + 2 more state sizes + 3 draws of random heads at k = 20
    assert jobs["distill_matrices"] == 3 and jobs["distill_stage"] == 2 * 10 and jobs["evaluate_hybrid"] == 11
    assert jobs["layer_swap"] == 33 and jobs["hybrid_attention"] == 3 + 4 and jobs["ssm_masking"] == 3
    for rule in ("evaluate_hybrid", "layer_swap", "hybrid_attention", "ssm_masking"):
        assert "gpu=1" in out.stdout.split(f"rule {rule}:", 1)[1].split("rule ", 1)[0]
    for rule in ("distill_matrices", "distill_stage"):  # hybrid_distillation.gpus_per_stage x nodes
        assert "gpu=8" in out.stdout.split(f"rule {rule}:", 1)[1].split("rule ", 1)[0]


def test_lint_is_clean():
    out = subprocess.run([*SNAKEMAKE, "--lint", "--cores", "1"], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "SLURM_CONF": "/dev/null"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_a_killed_distillation_stage_resumes_from_its_checkpoint(smoke_run, tmp_path):
    longer = changed_config(tmp_path, lambda c: c["experiments"]["hybrid_distillation"].update(steps=[2, 2, 60]))
    target = "results/hybrid/llama-tiny/k0-s8-ranked/stage3"
    ckpt = smoke_run / f"{target}.ckpt"
    cmd = [*SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(smoke_run), "--configfile", str(longer),
           "--cores", "1", target]
    env = {**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while len(list(ckpt.glob("step-*"))) < 2 and time.time() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and the job at once, as a lost node would
    proc.wait()
    assert list(ckpt.glob("step-*")) and not (smoke_run / target).exists()
    run(smoke_run, "--unlock", "--cores", "1", config=longer)
    run(smoke_run, "--cores", "1", target, config=longer)
    state = json.loads((smoke_run / target / "distill.json").read_text())
    assert state["steps"] == 60 and state["resumed_from"] >= 2 and not ckpt.exists()
    # every attempt's world size: the killed one from step 0, the resumed one from its checkpoint
    assert state["attempts"] == [{"ranks": 1, "from_step": 0}, {"ranks": 1, "from_step": state["resumed_from"]}]
