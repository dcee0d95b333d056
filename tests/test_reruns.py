"""Incremental and interrupted reruns, on a copy of the workflow in a scratch folder.

Incremental: dry runs count exactly the jobs each kind of change reruns, over the whole smoke
DAG. The smoke study takes minutes to run, and a dry run needs only outputs with the right
timestamps and provenance, not their contents: the workdir is a "skeleton", every output of
the DAG an empty placeholder recorded by `snakemake --touch --forceall` (the no-op rerun and a
scan-parameter change after a real run are in test_pipeline.py).

Interruption: a real run of part of the smoke study (two models, the probe, their head scans)
with a larger Llama and probe, so that a head scan lasts long enough to be killed in the
middle; runs killed with SIGKILL or SIGINT during that evaluation job are recovered with the
manual's commands (docs/reproducibility.md) and end bit-identical to the uninterrupted run. A checkpoint (or any output)
killed while being written never appears under its final name (gna.io, under a real SIGKILL).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from test_pipeline import planned_jobs

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
ENV = {**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE"}
SMOKE = ROOT / "workflow/configs/smoke.yaml"
# Part of the smoke DAG, as targets: two models, the probe, their head scans.
BRANCH = ["results/scan/llama-tiny.ranking.csv", "results/scan/mamba2-tiny.ranking.csv"]


def copy_source(dest: Path) -> Path:
    """The workflow's sources and shipped data (not the gna library, which is installed)."""
    for name in ("Snakefile", "config.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("envs", "data"):
        shutil.copytree(ROOT / name, dest / name)
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("gna", "*.egg-info", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A copy of the sources, so that a test can edit a script without touching the repository
    (the same copy throughout: with --directory, shipped data paths are absolute in params)."""
    return copy_source(tmp_path_factory.mktemp("src"))


def snakemake(src: Path, workdir: Path, config: Path, *args, check=True):
    cmd = [*SNAKEMAKE, "-s", str(src / "Snakefile"), "--directory", str(workdir), "--configfile", str(config), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if check and out.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def write_config(cfg: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# --- incremental, over the whole smoke DAG ----------------------------------------------------

def directory_outputs(src: Path, config: Path, workdir: Path) -> dict[str, list[re.Pattern]]:
    """rule -> patterns of its directory() outputs (a placeholder for those is a folder)."""
    from snakemake.api import SnakemakeApi
    from snakemake.io import is_flagged
    from snakemake.settings.types import ConfigSettings, ResourceSettings

    with SnakemakeApi() as api:
        wf = api.workflow(snakefile=src / "Snakefile", workdir=workdir, resource_settings=ResourceSettings(),
                          config_settings=ConfigSettings(configfiles=[config]))
        return {r.name: [re.compile(o.regex().pattern) for o in r.output if is_flagged(o, "directory")]
                for r in wf._workflow.rules}


@pytest.fixture(scope="module")
def skeleton(source, tmp_path_factory) -> Path:
    """A workdir where every output of the smoke DAG exists (empty) and is up to date."""
    work = tmp_path_factory.mktemp("skeleton")
    dirs = directory_outputs(source, SMOKE, work)
    summary = snakemake(source, work, SMOKE, "--summary", "--cores", "1").stdout.splitlines()
    assert summary[0].startswith("output_file\t")
    for line in summary[1:]:
        path, _, rule = line.split("\t")[:3]
        if any(rx.match(path) for rx in dirs.get(rule, [])):
            (work / path).mkdir(parents=True, exist_ok=True)
        else:
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).touch()
    snakemake(source, work, SMOKE, "--touch", "--forceall", "--cores", "1")
    assert planned_jobs(snakemake(source, work, SMOKE, "-n", "--cores", "1")) == {}
    return work


def smoke_with(edit, tmp_path) -> Path:
    cfg = yaml.safe_load(SMOKE.read_text())
    edit(cfg)
    return write_config(cfg, tmp_path / "changed.yaml")


@pytest.mark.parametrize("change,expected", [
    pytest.param(lambda c: c["experiments"]["kv_pairs"].update(pairs=[2, 3]),
                 {"kv_probe": 3, "kv_pairs": 3, "kv_pairs_figure": 1, "findings": 1, "all": 1}, id="kv_pairs"),
    pytest.param(lambda c: c["experiments"]["topk_removal"].update(k=[0, 1]),
                 # k = 1 ranked and its random control (2 draws) for each of the 2 models, a model's in one job
                 # (its k = 0 too: the hybrid table reading it follows)
                 {"batch_topk_removal": 2, "topk_tables": 1, "topk_figure": 1, "hybrid_attention_table": 1,
                  "findings": 1, "all": 1},
                 id="topk_removal"),
    pytest.param(lambda c: c["experiments"]["layer_pruning"].update(tolerance=0.4),
                 {"minimal_model": 1, "batch_individual_pruning": 1, "critical_layers": 1, "critical_heads": 1,
                  "head_keeping": 4,
                  "pruning_figures": 1, "head_keeping_table": 1, "findings": 1, "all": 1}, id="layer_pruning"),
    pytest.param(lambda c: c["models"]["mamba2-tiny"]["random"].update(hidden=64),
                 {"random_model": 1, "head_scan": 1, "ga_heatmaps": 1, "head_ranking_figure": 1, "ssm_masking": 3,
                  "ssm_masking_figure": 1, "head_patterns": 1, "head_explorer": 3, "findings": 1, "all": 1},
                 id="one-model"),  # every explorer page offers every scanned model
])
def test_an_experiment_change_reruns_only_its_jobs_and_the_tables_they_feed(skeleton, source, tmp_path,
                                                                             change, expected):
    changed = smoke_with(change, tmp_path)
    assert planned_jobs(snakemake(source, skeleton, changed, "-n", "--cores", "1")) == expected


def test_a_code_change_in_one_script_reruns_only_the_rules_that_use_it(skeleton, source):
    # topk_tables.py draws the top-k removal and the ARC chat tables; the figure and findings read them.
    script, expected = "topk_tables.py", {"topk_tables": 2, "topk_figure": 1, "findings": 1, "all": 1}
    # (Snakemake sees a script change by its modification time: the restore below puts it back.)
    path = source / "workflow/scripts" / script
    original, stat = path.read_bytes(), path.stat()
    try:
        path.write_bytes(original + b"\n# an edit\n")
        out = snakemake(source, skeleton, SMOKE, "-n", "--cores", "1")
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert planned_jobs(out) == expected and "Code has changed" in out.stdout


def test_reordering_the_config_reruns_nothing(skeleton, source, tmp_path):
    cfg = yaml.safe_load(SMOKE.read_text())
    changed = tmp_path / "reordered.yaml"
    changed.write_text(yaml.safe_dump(cfg, sort_keys=True))
    assert planned_jobs(snakemake(source, skeleton, changed, "-n", "--cores", "1")) == {}


# --- interruption, on a real run of the head-scan branch --------------------------------------

@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """The smoke preset with a larger Llama (6 layers x 8 heads) and probe (96 prompts of 8
    pairs): its head scan runs for seconds, not a fraction of one."""
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["models"]["llama-tiny"]["random"].update(hidden=128, layers=6, heads=8)
    cfg["kv_probe"]["n_examples"] = 96
    cfg["scan"]["n_pairs"] = 8
    return write_config(cfg, tmp_path_factory.mktemp("cfg") / "study.yaml")


@pytest.fixture(scope="module")
def reference(source, study, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("reference")
    snakemake(source, work, study, "--cores", "2", *BRANCH)
    assert planned_jobs(snakemake(source, work, study, "-n", "--cores", "1", *BRANCH)) == {}
    return work


def outputs(folder: Path) -> dict[str, bytes]:
    """results/ and figures/, minus the temporaries a killed write leaves (`.<name>.<rand>.tmp`,
    which nothing reads and .dvcignore keeps out of DVC)."""
    files = {}
    for sub in ("results", "figures"):
        for p in sorted((folder / sub).rglob("*")):
            rel = p.relative_to(folder)
            if p.is_file() and not any(part.startswith(".") and part.endswith(".tmp") for part in rel.parts):
                files[str(rel)] = p.read_bytes()
    return files


def start_and_kill(src, workdir, config, log: Path, sig, *args) -> None:
    """Run snakemake in its own process group; the moment `log` shows its job started, send
    `sig` to the whole group (as Ctrl-C does for SIGINT; `kill -9 -<pgid>` for SIGKILL)."""
    log.unlink(missing_ok=True)
    cmd = [*SNAKEMAKE, "-s", str(src / "Snakefile"), "--directory", str(workdir), "--configfile", str(config),
           "--cores", "1", *BRANCH, *args]  # (targets first: --forcerun takes a list)
    # A shell starts background commands with SIGINT ignored, and an ignored signal stays ignored
    # across exec (Python then installs no KeyboardInterrupt handler): give snakemake the default,
    # as a terminal's foreground job has.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    try:
        while not (log.exists() and "gna INFO rule" in log.read_text()):
            assert proc.poll() is None, f"snakemake ended before the job started:\n{proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.02)
        os.killpg(proc.pid, sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0


def recover(src, work, study, sig) -> dict[str, int]:
    """The manual's recovery after a kill (docs/reproducibility.md); returns the jobs it planned before rerunning them."""
    if sig == signal.SIGKILL:
        # No chance to clean up: the lock stays (`--unlock` lifts it), and an output written
        # before the kill by a job that did not finish is marked incomplete (`--rerun-incomplete`).
        assert any((work / ".snakemake/locks").iterdir()), "SIGKILL leaves the lock behind"
        snakemake(src, work, study, "--unlock", "--cores", "1", *BRANCH)
        args = ["--rerun-incomplete"]
    else:  # Ctrl-C: snakemake stops its jobs, deletes their outputs and unlocks: just rerun
        args = []
    dry = snakemake(src, work, study, "-n", "--cores", "1", *args, *BRANCH)
    assert "cannot be locked" not in dry.stdout + dry.stderr
    snakemake(src, work, study, "--cores", "2", *args, *BRANCH)
    return planned_jobs(dry)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_run_killed_during_an_evaluation_job_reruns_to_identical_results(reference, source, study, tmp_path, sig):
    work = tmp_path / "work"
    shutil.copytree(reference, work, symlinks=True)
    ranking = work / "results/scan/llama-tiny.ranking.csv"
    start_and_kill(source, work, study, work / "logs/scan/llama-tiny.log", sig,
                   "--forcerun", "results/scan/llama-tiny.ranking.csv")
    assert not ranking.exists(), "the head scan finished before the kill: make it longer"
    plan = recover(source, work, study, sig)
    # nothing half-done was trusted: the killed job was planned again
    assert plan == {"head_scan": 1}, plan
    assert outputs(work) == outputs(reference)


@pytest.mark.parametrize("directory", [True, False], ids=["checkpoint-folder", "file"])
def test_a_write_killed_midway_never_appears_under_its_final_name(tmp_path, directory):
    """gna.io's guarantee under a real SIGKILL: the destination appears whole or not at all."""
    dest = tmp_path / ("model" if directory else "rows.csv")
    writer = (
        "import sys, time\n"
        "from gna.io import atomic_path\n"
        f"with atomic_path({str(dest)!r}, directory={directory}) as tmp:\n"
        f"    target = tmp / 'model.safetensors' if {directory} else tmp\n"
        "    with open(target, 'wb') as f:\n"
        "        f.write(b'x' * 1_000_000); f.flush()\n"
        "        print('half written', flush=True)\n"
        "        time.sleep(60)\n"
        "        f.write(b'y' * 1_000_000)\n")
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert proc.stdout.readline().strip() == "half written"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not dest.exists()
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert len(leftovers) == 1 and leftovers[0].startswith(f".{dest.name}.") and leftovers[0].endswith(".tmp")
