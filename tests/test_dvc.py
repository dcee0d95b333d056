"""DVC round trip: `dvc repro` (one stage that runs Snakemake), push to the default remote,
then a fresh clone pulls with the README's command and Snakemake has nothing to do.

Runs on a copy of the project in a scratch git repository; its default remote
(.dvc/config: ../gna-dvc-remote) is a folder next to that copy, shared by its clone. The study is
the smoke preset without its `experiments` (models, probe, head scans, ranking figure, findings:
10 jobs); the whole preset takes minutes.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_pipeline import planned_jobs

ROOT = Path(__file__).resolve().parents[1]
STUDY = "study.yaml"  # written into the scratch repository
# The manual's pull command (docs/dvc.md); here with --configfile STUDY.
PULL = "dvc pull && dvc status -q && snakemake --touch --forceall --cores 1"
PROJECT = ["Snakefile", "config.yaml", "pyproject.toml", "dvc.yaml", ".dvcignore", ".gitignore", ".dvc/config",
           ".dvc/.gitignore", "envs", "data", "workflow", "results/README.md"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def sh(cmd: str, cwd: Path, env: dict, check=True) -> subprocess.CompletedProcess:
    out = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if check and out.returncode:
        raise AssertionError(f"{cmd} failed in {cwd}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def outputs(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for sub in ("results", "figures") for p in sorted((folder / sub).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pushed(tmp_path_factory):
    """A scratch clone of the project after `dvc repro` and `dvc push`: (repo, env, outputs)."""
    base = tmp_path_factory.mktemp("dvc")
    repo = base / "repo"
    for name in PROJECT:
        src, dst = ROOT / name, repo / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dst)
    study = yaml.safe_load((ROOT / "workflow/configs/smoke.yaml").read_text())
    study.pop("experiments", None)
    (repo / STUDY).write_text(yaml.safe_dump(study, sort_keys=False))
    # `dvc repro` runs `snakemake --cores all`; SNAKEMAKE_PROFILE (read by Snakemake itself, the
    # way a cluster profile is passed through DVC) points it at the study.
    profile = base / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump({"configfile": str(repo / STUDY)}))
    env = {**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE", "DVC_NO_ANALYTICS": "1",
           "SNAKEMAKE_PROFILE": str(profile), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    sh("git init -q -b main && git add -A && git commit -qm project", repo, env)

    sh("dvc repro", repo, env)
    assert "didn't change" in sh("dvc repro", repo, env).stdout  # nothing changed: nothing rerun
    assert sh("dvc status", repo, env).stdout.strip() == "Data and pipelines are up to date."
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert {o["path"] for o in lock["stages"]["pipeline"]["outs"]} == set(dvc_outputs())
    # figures/ is git's (cache: false), results/ DVC's: the README's "record and share"
    sh("git add dvc.lock .gitignore figures && git commit -qm results", repo, env)
    assert "figures/findings.md" in sh("git ls-files figures", repo, env).stdout
    sh("dvc push", repo, env)
    assert any((base / "gna-dvc-remote").rglob("*")), "the default remote is ../gna-dvc-remote"
    expected = outputs(repo)
    assert len(expected) > 10 and any(f.startswith("figures/") for f in expected)
    return repo, {k: v for k, v in env.items() if k != "SNAKEMAKE_PROFILE"}, expected


def pull_and_check(repo: Path, env: dict, expected: dict) -> None:
    sh(f"{PULL} --configfile {STUDY}", repo, env)
    dry = sh(f"snakemake -n --cores 1 --configfile {STUDY}", repo, env)
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    assert outputs(repo) == expected  # every file, bit for bit
    assert sh("dvc status", repo, env).stdout.strip() == "Data and pipelines are up to date."


def test_a_fresh_clone_pulls_and_snakemake_has_nothing_to_do(pushed):
    repo, env, expected = pushed
    clone = repo.parent / "clone"
    sh(f"git clone -q {repo} {clone}", repo.parent, env)
    assert [p.name for p in (clone / "results").iterdir()] == ["README.md"]   # git holds only the README
    assert (clone / "figures/findings.md").is_file()                            # and every figure
    # Without the touch, checkout order would make Snakemake recompute:
    sh("dvc pull", clone, env)
    assert planned_jobs(sh(f"snakemake -n --cores 1 --configfile {STUDY}", clone, env))
    pull_and_check(clone, env, expected)
    # The touch recorded provenance for every job: a change still reruns exactly its jobs.
    cfg = yaml.safe_load((clone / STUDY).read_text())
    cfg["kv_probe"]["n_examples"] += 1
    (clone / "changed.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert planned_jobs(sh("snakemake -n --cores 1 --configfile changed.yaml", clone, env)) == {
        "kv_probe": 1, "head_scan": 3, "head_patterns": 3, "head_explorer": 3, "head_ranking_figure": 1, "findings": 1,
        "all": 1}


def dvc_outputs() -> list[str]:
    return [next(iter(o)) if isinstance(o, dict) else o
            for o in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["pipeline"]["outs"]]


def test_dvc_tracks_every_results_folder_a_rule_writes():
    """DVC tracks results/<step> folders (results/README.md is git's): a new step must be added."""
    import re
    rules = "\n".join(p.read_text() for p in (ROOT / "workflow/rules").rglob("*.smk"))
    folders = set(re.findall(r'results/([a-z_]+)[/"]', rules))
    for wildcard in re.findall(r'"results/\{(\w+)\}/', rules):      # results/{experiment}/, {scan_dir}
        folders |= set(re.search(wildcard + r'="([\w|]+)"', rules).group(1).split("|"))
    outs = dvc_outputs()
    assert {f"results/{f}" for f in folders} <= set(outs), sorted({f"results/{f}" for f in folders} - set(outs))
    assert "figures" in outs and "results" not in outs
    cmd = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["pipeline"]["cmd"]
    assert all(o in cmd.split() for o in outs if o.startswith("results/"))   # created even when empty


def test_the_manual_documents_the_pull_command():
    readme = (ROOT / "docs/dvc.md").read_text()
    assert PULL in readme and "SNAKEMAKE_PROFILE=profiles/slurm dvc repro" in readme
