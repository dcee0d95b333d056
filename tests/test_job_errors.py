"""A job that fails because of the user's input shows one line on the terminal, no traceback; the
job's log keeps the traceback."""
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gna.jobs import script_job as pipeline
from gna.errors import HeadIndexError
from test_cli import FakeSnakemake

ROOT = Path(__file__).resolve().parents[1]


class Exited(Exception):
    pass


@pytest.fixture
def script_job(monkeypatch):
    """job() as in a real Snakemake script job: it ends the process (os._exit) at the end."""
    monkeypatch.setattr(pipeline, "_is_script_job", lambda smk: True)

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(pipeline.os, "_exit", exit_)


@pytest.mark.parametrize("error,line", [
    (OSError(errno.ENOSPC, "No space left on device", "results/x.csv"),
     "Error in rule r: cannot write results/x.csv: No space left on device"),
    (HeadIndexError("head 9 is out of range\nfor layer 1"), "Error in rule r: head 9 is out of range for layer 1"),
])
def test_a_user_caused_failure_is_one_line_and_the_log_keeps_the_traceback(tmp_path, capsys, script_job, error, line):
    smk = FakeSnakemake("r", tmp_path / "logs/r.log")
    with pytest.raises(Exited, match="1"):
        with pipeline.job(smk):
            raise error
    err = capsys.readouterr().err
    assert err == f"{line} (traceback in {tmp_path / 'logs/r.log'})\n"
    assert "Traceback (most recent call last)" in (tmp_path / "logs/r.log").read_text()


def test_a_bug_keeps_its_traceback(tmp_path, script_job):
    with pytest.raises(ZeroDivisionError):
        with pipeline.job(FakeSnakemake("r", tmp_path / "logs/r.log")):
            1 / 0


@pytest.mark.slow  # ~20 s: Snakemake and two jobs
def test_a_truncated_model_in_the_pipeline_shows_one_line(tmp_path):
    """The real thing: Snakemake runs kv_probe then head_scan on a model whose weights are cut short."""
    broken = tmp_path / "broken"
    shutil.copytree(ROOT / "data/models/micro-llama", broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg.update(models={"m": {"path": str(broken)}}, experiments={})
    cfg["scan"].update(models=["m"])
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path / "w"), "--configfile", str(tmp_path / "cfg.yaml"), "--cores", "1",
                          "results/scan/m.ranking.csv"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "SLURM_CONF": "/dev/null"})
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "Traceback" not in text
    assert (f"Error in rule head_scan: cannot load model models.m ({broken}): SafetensorError: " in text
            and "(traceback in logs/scan/m.log)" in text)
    assert not (tmp_path / "w/results/scan").exists()
    assert "Traceback (most recent call last)" in (tmp_path / "w/logs/scan/m.log").read_text()
