"""A job is an ordinary child of Snakemake: it runs with its caller's umask (the former warm
start's forked jobs took the server's: world-readable files under umask 077)."""
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = "results/probes/kv-compact-n2-s3-space.examples.jsonl"  # a smoke-preset job with no model (seconds)


def test_a_job_writes_with_its_callers_umask(tmp_path):
    def caller():
        os.umask(0o077)

    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                          "--configfile", str(ROOT / "workflow/configs/smoke.yaml"), "--cores", "1", PROBE],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, preexec_fn=caller,
                         env={**os.environ, "SLURM_CONF": "/dev/null"})
    assert out.returncode == 0, out.stderr[-3000:]
    for path in (tmp_path / PROBE, tmp_path / "logs/probes/kv-compact-n2-s3-space.log"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path  # not readable by another user


def test_saved_weights_get_the_umask_mode_of_the_other_files(tmp_path):
    """safetensors creates its files owner-only whatever the umask; a model saved through
    gna.io.atomic_path gets the mode its config.json gets (here 0o644 under umask 022)."""
    import torch
    from safetensors.torch import save_file

    from gna.io import atomic_path

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "model", directory=True) as tmp:
            save_file({"w": torch.zeros(2)}, tmp / "model.safetensors")
            (tmp / "config.json").write_text("{}")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "model").iterdir()}
    assert modes == {"model.safetensors": 0o644, "config.json": 0o644}
