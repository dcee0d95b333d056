"""The pipeline on a real one-node Slurm cluster, through the executor plugin and profiles/slurm.

The cluster (munged, slurmctld, slurmd, two fake GPUs) is started by .ci/slurm/start.sh in a
scratch folder and stopped by PID by .ci/slurm/stop.sh. Needs root and the Debian packages of
.ci/slurm/install.sh; CI installs them, elsewhere these tests skip. The profile checks at the
bottom need no cluster.
"""
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PROFILE = ROOT / "profiles/slurm"
SMOKE = ROOT / "workflow/configs/smoke.yaml"
SLURM_EXES = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
# Part of the smoke preset: two models, the probe and their head scans (5 of its jobs, CPU and
# GPU rules). The whole preset takes minutes locally, and each job on Slurm adds ~10-20 s.
BRANCH = ["results/scan/llama-tiny.ranking.csv", "results/scan/mamba2-tiny.ranking.csv"]

missing = [exe for exe in SLURM_EXES if not shutil.which(exe)]
UNAVAILABLE = (f"Slurm is not installed ({', '.join(missing)} missing): run .ci/slurm/install.sh as root"
               if missing else "a test Slurm cluster needs root (slurmd runs jobs as their user)"
               if os.geteuid() != 0 else "")
# CI sets GNA_REQUIRE_SLURM=1: there a missing Slurm fails these tests instead of skipping them.
REQUIRED = os.environ.get("GNA_REQUIRE_SLURM") == "1"
needs_slurm = pytest.mark.skipif(bool(UNAVAILABLE) and not REQUIRED, reason=UNAVAILABLE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running one-node cluster: yields the environment its clients need."""
    if UNAVAILABLE:
        pytest.fail(f"GNA_REQUIRE_SLURM=1 but {UNAVAILABLE}")
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_CI_CTLD_PORT": str(free_port()), "SLURM_CI_SLURMD_PORT": str(free_port())}
    start = subprocess.run([ROOT / ".ci/slurm/start.sh", state, "2"], env=env, capture_output=True, text=True)
    pids = {}
    try:
        if (state / "pids").exists():
            pids = dict(line.split() for line in (state / "pids").read_text().splitlines())
        assert start.returncode == 0, start.stdout + start.stderr
        yield {**os.environ, "SLURM_CONF": str(state / "etc/slurm.conf"), "OMP_WAIT_POLICY": "PASSIVE",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    finally:
        subprocess.run([ROOT / ".ci/slurm/stop.sh", state], env=env, capture_output=True, text=True, timeout=120)
        time.sleep(0.2)
        alive = [f"{name} {pid}" for name, pid in pids.items() if Path(f"/proc/{pid}").exists()
                 and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()]
        assert not alive, f"stop.sh left daemons running: {alive}"
        assert not Path("/run/slurm/conf").is_symlink() or os.readlink("/run/slurm/conf") != str(state / "etc")


@pytest.fixture(scope="module")
def profile(cluster, tmp_path_factory):
    """profiles/slurm as it is, except that a memory request larger than this node (a small CI
    runner) is lowered to the node's memory: Slurm refuses a job no node can hold."""
    out = subprocess.run(["scontrol", "show", "node", "-o"], capture_output=True, text=True, env=cluster, check=True)
    node_mb = int(out.stdout.split("RealMemory=")[1].split()[0])
    cfg = yaml.safe_load((PROFILE / "config.yaml").read_text())
    for res in [cfg["default-resources"], *cfg["set-resources"].values()]:
        if res.get("mem_mb", 0) > node_mb:
            res["mem_mb"] = node_mb
    folder = tmp_path_factory.mktemp("profile")
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return folder


def on_slurm(workdir, *args, env, profile, snakefile=ROOT / "Snakefile", timeout=280):
    """snakemake --profile profiles/slurm, plus what this cluster needs: no accounting (so squeue
    for job states) and a short first status check (the jobs here take seconds, not hours)."""
    cmd = [*SNAKEMAKE, "-s", str(snakefile), "--directory", str(workdir), "--profile", str(profile),
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-4000:]}"
    return out.stdout + out.stderr


def slurm_jobs(env) -> list[dict]:
    """Every job the controller remembers (MinJobAge keeps finished ones), as field dicts."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, env=env, check=True)
    return [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in out.stdout.splitlines() if line]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for sub in ("results", "figures") for p in sorted((folder / sub).rglob("*")) if p.is_file()}


@needs_slurm
def test_smoke_preset_through_the_plugin_equals_a_local_run(cluster, profile, tmp_path):
    local, remote = tmp_path / "local", tmp_path / "slurm"
    # The local reference run goes on while the cluster's jobs wait for their status checks.
    reference = subprocess.Popen(
        [*SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(local), "--configfile", str(SMOKE),
         "--cores", "1", *BRANCH], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "SLURM_CONF": "/dev/null", "OMP_WAIT_POLICY": "PASSIVE"})
    try:
        # gpus_per_job=1: the head scans ask the fake GPUs for one each (the model stays on the CPU).
        out = on_slurm(remote, *BRANCH, "--configfile", str(SMOKE), "--config", "gpus_per_job=1", env=cluster,
                       profile=profile)
    finally:
        _, err = reference.communicate(timeout=280)
    assert reference.returncode == 0, err[-3000:]
    assert "5 of 5 steps (100%) done" in out

    expected, got = tree(local), tree(remote)
    assert sorted(got) == sorted(expected) and len(got) >= 15
    assert [f for f in expected if got[f] != expected[f]] == []

    # Every job went through Slurm, with the profile's resources: GPU rules on the gpu partition
    # with --gpus=1 and one task, CPU rules on the cpu partition without GPUs.
    cfg = yaml.safe_load((profile / "config.yaml").read_text())
    jobs = [j for j in slurm_jobs(cluster) if j.get("WorkDir") == str(remote)]
    rules = sorted(j["Comment"].split("_wildcards")[0].removeprefix("rule_") for j in jobs)
    assert rules == [*["head_scan"] * 2, "kv_probe", *["random_model"] * 2]
    for j in jobs:
        assert j["JobState"] == "COMPLETED" and j["NumTasks"] == "1"
        if "head_scan" in j["Comment"]:
            res = {**cfg["default-resources"], **cfg["set-resources"]["head_scan"]}
            assert (j["Partition"], j.get("TresPerJob")) == (res["slurm_partition"], "gres:gpu:1")
        else:
            res = cfg["default-resources"]
            assert (j["Partition"], j.get("TresPerJob")) == (res["slurm_partition"], None)
        assert j["MinMemoryNode"] == f"{res['mem_mb']}M"
        assert j["TimeLimit"] == f"{res['runtime'] // 60:02d}:{res['runtime'] % 60:02d}:00"
    # and a rerun through the cluster has nothing to do
    rerun = on_slurm(remote, *BRANCH, "--configfile", str(SMOKE), "--config", "gpus_per_job=1", env=cluster,
                     profile=profile)
    assert "Nothing to be done" in rerun


@needs_slurm
def test_a_multi_gpu_job_is_launched_once_and_sees_all_its_gpus(cluster, profile, tmp_path):
    # A rule named like a GPU rule of the pipeline, so the profile's set-resources apply to it.
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(
        "rule head_scan:\n"
        "    output: 'launches.txt'\n"
        "    resources: gpu=2\n"
        "    shell: 'echo \"gpus=$CUDA_VISIBLE_DEVICES\" >> {output}; sleep 2'\n")
    on_slurm(tmp_path, snakefile=snakefile, env=cluster, profile=profile)
    assert (tmp_path / "launches.txt").read_text().splitlines() == ["gpus=0,1"]


@needs_slurm
def test_a_distillation_stage_runs_on_two_ranks_in_one_slurm_job(cluster, profile, tmp_path):
    # The smoke preset's stage 1 on gpus_per_stage: 2: the job asks for 2 (fake) GPUs and one task,
    # and its script starts 2 torchrun ranks (gloo: the fake GPUs have no CUDA) that split each batch.
    cfg = yaml.safe_load(SMOKE.read_text())
    # fake GPUs (no CUDA: gloo ranks, allowed by name), one core per rank on a small CI runner
    cfg["experiments"]["hybrid_distillation"].update(gpus_per_stage=2, cpu_ranks=True, cpus_per_rank=1)
    (tmp_path / "two_ranks.yaml").write_text(yaml.safe_dump(cfg))
    target = "results/hybrid/llama-tiny/s8/stage1"
    on_slurm(tmp_path, target, "--configfile", str(tmp_path / "two_ranks.yaml"), "--config", "gpus_per_job=1",
             env=cluster, profile=profile, timeout=450)  # 2 jobs: the random teacher, then the stage
    info = json.loads((tmp_path / target / "distill.json").read_text())
    assert info["ranks"] == 2 and info["steps"] == 2 and all(math.isfinite(x) for x in info["losses"])
    log = (tmp_path / "logs/hybrid/llama-tiny/s8/stage1.log").read_text()
    assert "starting 2 ranks" in log and "--nproc-per-node=2" in log
    assert not (tmp_path / "results/hybrid/llama-tiny/s8/stage1.ckpt").exists()  # removed by rank 0 at the end
    job = next(j for j in slurm_jobs(cluster) if j.get("WorkDir") == str(tmp_path) and "distill_matrices" in j["Comment"])
    assert job["JobState"] == "COMPLETED" and job["NumTasks"] == "1" and job.get("TresPerJob") == "gres:gpu:2"


@needs_slurm
def test_ranks_started_by_srun_join_one_process_group(cluster, tmp_path):
    # The several-node launch (gna.hybrid.stage_launch): srun, one task per rank, the rank from
    # SLURM_PROCID (gna.hybrid.distributed.process_group); here 2 tasks on the one node, running
    # tests/test_distributed.py's ranks: their stage-1 weights equal one process', and the rank that
    # fails at the end fails the step (--kill-on-bad-exit).
    import torch

    import test_distributed as D

    env = {**cluster, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": f"{ROOT / 'workflow'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(["srun", "--ntasks=2", "--kill-on-bad-exit=1", "-p", "cpu", sys.executable,
                           str(ROOT / "tests/test_distributed.py"), str(tmp_path)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=280)
    assert done.returncode != 0 and "rank 1 fails on purpose" in done.stdout + done.stderr
    assert (tmp_path / "resumed.json").is_file(), done.stderr[-3000:]
    torch.set_num_threads(1)
    one, _ = D.run(D.teacher(), 1, tmp_path / "one")
    assert D.close(torch.load(tmp_path / "stage1.pt", weights_only=True), one.state_dict(), 1e-6)


# --- the profile itself (no cluster needed) --------------------------------------------------

def rules_and_resources(gpus: int, workdir: Path) -> dict[str, dict]:
    """Every rule of the workflow and the resources it declares, for a config asking `gpus` GPUs."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, ResourceSettings

    with SnakemakeApi() as api:
        wf = api.workflow(snakefile=ROOT / "Snakefile", workdir=workdir, resource_settings=ResourceSettings(),
                          config_settings=ConfigSettings(configfiles=[SMOKE], config={"gpus_per_job": gpus}))
        return {r.name: {k: v for k, v in r.resources.items() if not k.startswith("_")}
                for r in wf._workflow.rules}


def test_profile_gives_every_gpu_rule_a_gpu_partition_and_cpu_rules_none(tmp_path, monkeypatch):
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    defaults, per_rule = profile["default-resources"], profile["set-resources"]
    assert {"slurm_partition", "runtime", "mem_mb"} <= set(defaults) and "gpu" not in defaults
    monkeypatch.setenv("SLURM_CONF", "/dev/null")
    rules = rules_and_resources(2, tmp_path)
    # a batch of one rule's conditions (workflow/rules/batch.smk) is named by the DAG: it takes its rule's
    batched = {name: re.fullmatch(r"batch_(\w+)_\d+", name)[1] for name in rules if re.fullmatch(r"batch_\w+_\d+", name)}
    gpu_rules = {batched.get(name, name) for name, res in rules.items() if "gpu" in res}
    assert "head_scan" in gpu_rules
    assert gpu_rules <= set(per_rule), f"set-resources lacks GPU rules: {sorted(gpu_rules - set(per_rule))}"
    # also the rules of files not included yet: every `rule x:` block that asks for a GPU (`**MODEL_RESOURCES`
    # or `gpu=`), found in the text as gna.plan finds them
    from gna.plan.jobs import GPU_RESOURCES

    parts = re.split(r"^rule (\w+):", "\n".join(p.read_text() for p in sorted((ROOT / "workflow/rules").glob("*.smk"))),
                     flags=re.M)
    blocks = dict(zip(parts[1::2], parts[2::2]))
    declared = {name for name, body in blocks.items() if GPU_RESOURCES.search(body)}
    assert gpu_rules <= declared, f"not found in the rule text: {sorted(gpu_rules - declared)}"
    assert declared <= set(per_rule), f"set-resources lacks GPU rules: {sorted(declared - set(per_rule))}"
    assert set(per_rule) <= set(blocks), f"set-resources names unknown rules: {sorted(set(per_rule) - set(blocks))}"
    for name in per_rule:
        res = per_rule[name]
        if name not in declared:  # a CPU rule with its own runtime/memory (distill_tokens): the CPU partition
            assert res.get("slurm_partition", defaults["slurm_partition"]) == defaults["slurm_partition"], name
            assert not {"gpu", "gres"} & set(res), name
            continue
        assert res["slurm_partition"] != defaults["slurm_partition"]
        if name in ("distill_matrices", "distill_stage"):  # the rule asks its own tasks, CPUs and GPUs
            assert not {"tasks", "tasks_per_node", "cpus_per_task", "gpu_model", "nodes"} & set(res), name
        else:
            assert res.get("tasks") == 0, f"{name}: a multi-GPU job must stay one task (tasks: 0)"
        assert "gres" not in res and "gres" not in rules.get(name, {}), "gres with gpu is an error in the plugin"
        assert not any(flag in str(res.get("slurm_extra", "")) for flag in ("--gres", "--gpus"))
    # no rule names a partition or an account itself: that is the cluster's, so the profile's
    for name, res in rules.items():
        assert not {"slurm_partition", "slurm_account"} & set(res), name
    assert not (ROOT / "profiles/default").exists(), "profiles/default would silently override set-resources"
