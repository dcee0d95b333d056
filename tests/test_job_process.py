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


def test_the_deterministic_switch_does_not_import_the_compiler():
    # torch.use_deterministic_algorithms imports Inductor's config and TorchDynamo (seconds per model job)
    code = ("import sys, torch; from gna.pipeline import deterministic_torch; deterministic_torch(); "
            "print(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(), "
            "'torch._dynamo' in sys.modules, 'torch._inductor.config' in sys.modules); "
            "import torch._inductor.config as c; print(c.deterministic)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_DETERMINISTIC"})
    assert out.stdout.split() == ["True", "True", "False", "False", "True"], out.stderr[-2000:]
