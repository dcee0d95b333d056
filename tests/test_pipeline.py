"""The Snakemake workflow end to end on the smoke preset, in a scratch working directory."""
import os
import shutil
import subprocess
import sys
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
    """The 'Job stats' table of a dry run: rule -> count."""
    jobs, table = {}, False
    for line in out.stdout.splitlines():
        parts = line.split()
        if line.startswith("job ") and "count" in line:
            table = True
        elif table and len(parts) == 2 and parts[1].isdigit():
            if parts[0] == "total":
                break
            jobs[parts[0]] = int(parts[1])
    return jobs


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("smoke")
    run(work, "--cores", "2")
    return work


def test_smoke_preset_runs_end_to_end(smoke_run):
    ranking = pd.read_csv(smoke_run / "results/scan/llama-tiny.ranking.csv")
    assert len(ranking) == 8 and list(ranking["rank"]) == list(range(1, 9))
    ga = pd.read_csv(smoke_run / "results/scan/zamba2-tiny.ga.csv")
    assert {"gather_score", "aggregate_score", "role"} <= set(ga.columns) and len(ga) == 3
    for f in ("head_ranking.png", "head_ranking.pdf", "head_ranking.csv", "head_ranking.md"):
        assert (smoke_run / "figures" / f).stat().st_size > 0
    assert "head scan" in (smoke_run / "logs/scan/llama-tiny.log").read_text()  # progress went to the log


def test_rerun_has_nothing_to_do_and_a_param_change_reruns_only_its_jobs(smoke_run, tmp_path):
    assert planned_jobs(run(smoke_run, "-n", "--cores", "1")) == {}
    cfg = yaml.safe_load((ROOT / "workflow/configs/smoke.yaml").read_text())
    cfg["scan"]["batch_size"] = 4
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert planned_jobs(run(smoke_run, "-n", "--cores", "1", config=changed)) == {
        "head_scan": 3, "head_ranking_figure": 1, "all": 1}


@pytest.mark.parametrize("edit,message", [
    (lambda c: c["scan"].update(models=["nope"]), "scan.models names 'nope'"),
    (lambda c: c["models"]["llama-tiny"]["random"].update(family="rwkv"), "rwkv"),
    (lambda c: c["kv_probe"].update(n_examples=-3), "-3"),
    (lambda c: c["scan"].update(n_pairs=500), "500"),
])
def test_bad_config_is_refused_before_any_job(tmp_path, edit, message):
    cfg = yaml.safe_load((ROOT / "workflow/configs/smoke.yaml").read_text())
    edit(cfg)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = run(tmp_path, "-n", "--cores", "1", config=bad, check=False)
    assert out.returncode != 0 and message in out.stdout + out.stderr
    assert not (tmp_path / "results").exists()


def test_lint_is_clean():
    out = subprocess.run([*SNAKEMAKE, "--lint", "--cores", "1"], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "SLURM_CONF": "/dev/null"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
