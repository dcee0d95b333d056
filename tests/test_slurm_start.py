""".ci/slurm/start.sh and the one path it shares with other clusters: the /run/slurm/conf link.

A cluster killed before stop.sh ran (a timed-out CI job, a killed test) leaves the link behind,
pointing at a state folder whose daemons are gone; the next start must replace it, while a link
whose daemons still run is another cluster's and is refused. Kept out of test_slurm.py, whose
module-wide cluster holds the link for as long as that module runs. Needs root and Slurm's
Debian packages, like test_slurm.py.
"""
import os
import subprocess
from pathlib import Path

import pytest

from test_slurm import REQUIRED, ROOT, UNAVAILABLE, free_port

LINK = Path("/run/slurm/conf")
pytestmark = pytest.mark.skipif(bool(UNAVAILABLE) and not REQUIRED, reason=UNAVAILABLE or "")


@pytest.fixture
def foreign_link(tmp_path):
    """Points /run/slurm/conf at another state folder; yields that folder; restores nothing but
    its own link (a link that was here before means a cluster this test must not disturb)."""
    if UNAVAILABLE:
        pytest.fail(f"GNA_REQUIRE_SLURM=1 but {UNAVAILABLE}")
    if LINK.exists() or LINK.is_symlink():
        pytest.skip(f"{LINK} is in use here ({os.readlink(LINK) if LINK.is_symlink() else 'a folder'})")
    other = tmp_path / "other"
    (other / "etc").mkdir(parents=True)
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(other / "etc")
    try:
        yield other
    finally:
        if LINK.is_symlink() and os.readlink(LINK) == str(other / "etc"):
            LINK.unlink()


def start(state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLURM_CI_CTLD_PORT": str(free_port()), "SLURM_CI_SLURMD_PORT": str(free_port())}
    return subprocess.run([ROOT / ".ci/slurm/start.sh", state, "0"], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_link_whose_daemons_still_run_is_refused(foreign_link, tmp_path):
    daemon = subprocess.Popen(["sleep", "300"])
    try:
        (foreign_link / "pids").write_text(f"sleep {daemon.pid}\n")
        out = start(tmp_path / "ours")
        assert out.returncode == 1, out.stdout + out.stderr
        assert "belongs to a running cluster" in out.stderr
        assert os.readlink(LINK) == str(foreign_link / "etc")
        assert not (tmp_path / "ours" / "pids").exists()
    finally:
        daemon.kill()
        daemon.wait()


def test_a_link_left_by_a_killed_cluster_is_replaced(foreign_link, tmp_path):
    daemon = subprocess.Popen(["sleep", "300"])
    daemon.kill()
    daemon.wait()
    # A dead PID, and a live PID under another daemon's name (a PID reused since): both stale.
    (foreign_link / "pids").write_text(f"slurmctld {daemon.pid}\nslurmd {os.getpid()}\n")
    ours = tmp_path / "ours"
    try:
        out = start(ours)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "replacing a stale /run/slurm/conf" in out.stderr
        assert os.readlink(LINK) == str(ours / "etc")
    finally:
        subprocess.run([ROOT / ".ci/slurm/stop.sh", ours], capture_output=True, text=True, timeout=120)
    assert not LINK.is_symlink() or os.readlink(LINK) != str(ours / "etc")
