"""Warm start (gna.warm_start): a local run's model jobs fork from one server that imported torch,
transformers and lm-eval once. The job must be the job: same output, status, streams and signals."""
import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gna import warm_start

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets: Linux")

# A stand-in for a Snakemake script job: what hand_over() looks at (the class of Snakemake's object,
# its config), then work that shows where it ran.
JOB = """\
import os, sys, time
from gna import warm_start

class Snakemake:
    pass

Snakemake.__module__ = "snakemake.script"
snakemake = Snakemake()
snakemake.config = {"warm_start": True}
warm_start.hand_over(snakemake)
import torch
forked = os.getppid() != int(os.environ["TEST_PARENT"])  # the server's child, not the test's
print(f"ran {forked} child={warm_start._in_child} seed={torch.initial_seed()} cwd={os.getcwd()}")
print("to stderr", file=sys.stderr)
if sys.argv[1] == "sleep":
    open(sys.argv[2], "w").write(f"{os.getpid()} {os.getppid()}")
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def job_script(tmp_path_factory):
    work = tmp_path_factory.mktemp("warm")
    (work / "job.py").write_text(JOB)
    return work


# this module's own server: a variable of its own names another one than any other run's
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "workflow"), "GNA_TEST_WARM_START": os.urandom(6).hex(),
       "TEST_PARENT": str(os.getpid())}


def run_job(work, *args):
    return subprocess.run([sys.executable, "job.py", *args], cwd=work, env=ENV, capture_output=True, text=True,
                          timeout=120)


def test_a_job_runs_in_a_fork_of_the_server_with_its_own_streams_status_and_directory(job_script):
    first = run_job(job_script, "3")
    assert first.returncode == 3, first.stderr
    # a fork of the server ran it (not the client), in the client's directory
    assert first.stdout.startswith("ran True child=True") and first.stdout.strip().endswith(f"cwd={job_script}")
    assert "to stderr" in first.stderr
    second = run_job(job_script, "0")
    assert second.returncode == 0 and second.stdout.startswith("ran True child=True")
    seed = lambda out: out.split("seed=")[1].split()[0]  # noqa: E731
    assert seed(first.stdout) != seed(second.stdout)  # each job its own generator state, as a fresh interpreter
    log = (job_script / ".snakemake" / "gna-warm-start.log").read_text()
    assert log.count("importing") == 1  # one server, its imports paid once


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_signals_reach_the_job_and_a_dead_client_takes_its_job_along(job_script):
    run_job(job_script, "0")  # the server is up
    pidfile = job_script / "pid"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pidfile.unlink(missing_ok=True)
        client = subprocess.Popen([sys.executable, "job.py", "sleep", str(pidfile)], cwd=job_script, env=ENV,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not pidfile.exists() or not pidfile.read_text():
            assert time.time() < deadline
            time.sleep(0.05)
        child = int(pidfile.read_text().split()[0])
        assert child != client.pid
        client.send_signal(sig)
        assert client.wait(timeout=30) == -sig  # the client ends as its job did (or was killed itself)
        deadline = time.time() + 10
        while not gone(child):
            assert time.time() < deadline, f"the job outlived its client ({sig.name})"
            time.sleep(0.05)


def test_a_job_dies_with_its_server_and_the_next_job_starts_a_new_one(job_script):
    run_job(job_script, "0")
    pidfile = job_script / "pid2"
    client = subprocess.Popen([sys.executable, "job.py", "sleep", str(pidfile)], cwd=job_script, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.time() < deadline
        time.sleep(0.05)
    child, server = map(int, pidfile.read_text().split())
    os.kill(server, signal.SIGKILL)
    assert client.wait(timeout=30) == 1 and "server ended before the job did" in client.stderr.read()
    deadline = time.time() + 10
    while not gone(child):
        assert time.time() < deadline, "the job outlived its server"
        time.sleep(0.05)
    again = run_job(job_script, "0")
    assert again.returncode == 0 and again.stdout.startswith("ran True child=True")


def test_the_server_idles_out(tmp_path):
    name = "\0gna-warm-start-test-" + os.urandom(6).hex()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}
    code = f"from gna import warm_start; warm_start.PRELOAD = (); warm_start.serve({name!r}, idle_s=1.0)"
    start = time.time()
    server = subprocess.Popen([sys.executable, "-c", code], env=env)
    assert server.wait(timeout=60) == 0
    assert time.time() - start < 30


def test_cold_where_warm_start_cannot_or_must_not_work(monkeypatch):
    class Snakemake:
        config = {"warm_start": True}

    Snakemake.__module__ = "snakemake.script"
    assert warm_start._wanted(Snakemake())
    assert not warm_start._wanted(type("Stand", (), {"config": {"warm_start": True}})())  # a test's stand-in
    Snakemake.config = {"warm_start": False}
    assert not warm_start._wanted(Snakemake())
    Snakemake.config = {"warm_start": True}
    monkeypatch.setenv("SLURM_JOB_ID", "1")  # a cluster job: cold
    assert not warm_start._wanted(Snakemake())


def test_the_server_name_follows_the_code_and_the_environment(monkeypatch):
    name = warm_start.server_name()
    assert name.startswith("\0gna-warm-start-") and name == warm_start.server_name()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another")  # volatile: the same server
    assert warm_start.server_name() == name
    monkeypatch.setenv("HF_HUB_OFFLINE", "0" if os.environ.get("HF_HUB_OFFLINE") == "1" else "1")
    assert warm_start.server_name() != name  # read at import time: another server


# Scripts that must not hand over: they import no torch (tables, figures, probes: under a second), or
# set variables their imports read (distill_tokens goes online before importing huggingface_hub).
COLD = {"check_figures", "compare_micro_models", "critical_layers", "findings", "head_keeping_table",
        "head_ranking_figure", "hybrid_attention_table", "hybrid_tables", "kv_pairs_figure", "kv_probe",
        "layer_swap_figure", "micro_tasks", "minimal_model", "plan", "pruning_figures", "row_sweep_figure",
        "ssm_masking_figure", "topk_figure", "topk_tables", "distill_tokens", "head_explorer"}


def first_statements(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body  # after the docstring
    return [ast.unparse(n) for n in body[:2]]


def test_every_model_script_hands_over_before_its_imports():
    scripts = sorted(SCRIPTS.glob("*.py"))
    handing = {p.stem for p in scripts if first_statements(p) == ["from gna.warm_start import hand_over",
                                                                   "hand_over(snakemake)"]}
    assert handing == {p.stem for p in scripts} - COLD
    # the cold ones stay cheap: their imports bring no torch (one interpreter for all of them)
    imports = []
    for p in scripts:
        if p.stem in COLD - {"distill_tokens"}:
            tree = ast.parse(p.read_text())
            imports += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    code = "\n".join(imports + ["import sys", "assert 'torch' not in sys.modules, 'torch imported'"])
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT / "workflow")},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
