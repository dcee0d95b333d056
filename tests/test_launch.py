"""How a distillation stage is launched on Slurm (GPUs x nodes, CPUs per rank), what the sbatch
line is through the real executor plugin and a stand-in ``sbatch``, and the cluster commands of
the Markdown manual as written (dry runs)."""
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gna.errors import ConfigError
from gna.hybrid.study.stage_ranks import launch_resources

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# The Markdown files whose cluster commands must run as written (the manual may move into docs/:
# add its pages here).
MANUALS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
STAGE1 = "results/hybrid/micro-llama/s4/stage1"  # the micro study's: its only input is shipped


def test_launch_resources_for_one_node_several_nodes_and_one_gpu_per_node():
    assert launch_resources(8, 1, 4, True) == {"gpu": 8, "nodes": 1, "cpus_per_task": 32, "tasks": 0,
                                               "tasks_per_gpu": 0}
    assert launch_resources(4, 2, 6, True) == {"gpu": 0, "nodes": 2, "mpi": "srun", "tasks_per_node": 4,
                                               "tasks_per_gpu": 0, "cpus_per_task": 6,
                                               "slurm_extra": "--gpus-per-node=4"}
    assert launch_resources(1, 2, 4, True) == {"gpu": 0, "nodes": 2, "mpi": "srun", "tasks": 2, "tasks_per_gpu": 0,
                                               "cpus_per_task": 4, "slurm_extra": "--gpus-per-node=1"}
    assert "slurm_extra" not in launch_resources(4, 2, 4, False)  # a CPU-only study asks for no GPU


def test_more_ranks_than_gpus_are_refused_before_any_work():
    from gna.hybrid.stage_launch import check_rank_devices

    with pytest.raises(ConfigError, match=r"8 x 1 ranks, but this machine has no CUDA GPU.*cpu_ranks: true"):
        check_rank_devices(8, 1, device_count=0)
    with pytest.raises(ConfigError, match="this node has 4 CUDA GPU"):
        check_rank_devices(8, 1, device_count=4)
    check_rank_devices(2, 1, cpu_ranks=True, device_count=0)  # the tests' gloo ranks, asked for by name
    check_rank_devices(8, 2, device_count=8)


STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> "$SBATCH_LOG"
[ "$(basename "$0")" = sbatch ] && echo 4242
exit 0
"""


def sbatch_line(tmp_path: Path, gpus: int, nodes: int, extra=()) -> str:
    """Submit the micro study's stage-1 job through profiles/slurm with hybrid_distillation on
    ``gpus`` x ``nodes`` (the study on GPUs: gpus_per_job=1) to a stand-in ``sbatch`` (and
    stand-ins for the plugin's other Slurm commands); return the sbatch options up to ``--wrap``.
    ``extra``: more snakemake arguments. Without an sbatch call: AssertionError with snakemake's output."""
    bin_dir, work, log = tmp_path / "bin", tmp_path / "work", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue", "sacct", "sinfo", "sacctmgr", "scontrol", "scancel"):
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    cmd = [*SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--profile",
           str(ROOT / "profiles/slurm"), STAGE1, "--config", "gpus_per_job=1",
           f'experiments={{"hybrid_distillation": {{"gpus_per_stage": {gpus}, "nodes": {nodes}}}}}', *extra]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SBATCH_LOG": str(log),
           "SLURM_CONF": "/dev/null"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            lines = log.read_text().splitlines() if log.exists() else []
            submitted = [line for line in lines if line.startswith("sbatch ")]
            if submitted:
                return submitted[0].split(" --wrap", 1)[0]
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the run waits for job 4242, which the stand-in never ends
        out = proc.communicate(timeout=60)[0]
    raise AssertionError(f"no sbatch call; snakemake said:\n{out[-3000:]}")


@pytest.mark.parametrize("gpus,nodes,expected,absent", [
    # --nodes=1: Slurm would otherwise be free to spread the 8 GPUs over two nodes
    (8, 1, ["--gpus=8", "--cpus-per-task=32", "--nodes=1"], ["--ntasks", "--gpus-per-node"]),
    (4, 2, ["--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=4", "--gpus-per-node=4"], ["--gpus=", "--ntasks-per-gpu"]),
    (1, 2, ["--nodes=2", "--ntasks=2", "--cpus-per-task=4", "--gpus-per-node=1"], ["--gpus=", "--ntasks-per-gpu"]),
])
def test_the_sbatch_line_of_a_stage_on_gpus_x_nodes(tmp_path, gpus, nodes, expected, absent):
    line = sbatch_line(tmp_path, gpus, nodes)
    options = line.split()
    assert "-p" in options and options[options.index("-p") + 1] == "gpu", line
    for option in expected:
        assert option in options, f"{option} not in {line}"
    for option in absent:
        assert not any(o.startswith(option) for o in options), f"{option} in {line}"


def test_a_stage_longer_than_its_profile_runtime_is_refused_before_submission(tmp_path):
    # the plan gives the micro stage 1 two minutes (loading); one minute, one attempt is too short.
    # batch_conditions=1: one job per stage, as at paper scale (the micro study batches its stages)
    with pytest.raises(AssertionError) as refused:
        sbatch_line(tmp_path, 1, 1, extra=["batch_conditions=1", "--set-resources", "distill_matrices:runtime=1",
                                           "--preemptible-retries", "0"])
    said = str(refused.value)
    calls = (tmp_path / "calls.log").read_text() if (tmp_path / "calls.log").is_file() else ""
    assert "no sbatch call" in said and "sbatch " not in calls
    line = next(x for x in said.splitlines() if x.startswith("config error:"))
    assert re.search(r"distill_matrices\[state=4,teacher=micro-llama\]: the plan gives 0\.\d+ h, the profile "
                     r"grants runtime 1 min x 1 attempt\(s\) = 0\.02 h: raise set-resources distill_matrices "
                     r"runtime", line), line
    assert "preemptible-retries" in line and "gpus_per_stage" in line


def cluster_commands(markdown: Path) -> list[str]:
    """The shell commands of ``markdown``'s code blocks that run the workflow through the cluster
    profile (continuation lines joined, comments dropped)."""
    commands = []
    for block in re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", markdown.read_text(), flags=re.S):
        for command in re.sub(r"\\\n\s*", " ", block).splitlines():
            if re.search(r"(^|\s)snakemake\s", command) and "--profile profiles/slurm" in command:
                commands.append(command)
    return commands


def test_the_manual_has_cluster_commands():
    assert any(cluster_commands(md) for md in MANUALS), "no `snakemake --profile profiles/slurm` command found"


@pytest.mark.parametrize("command", [c for md in MANUALS for c in cluster_commands(md)])
def test_a_cluster_command_of_the_manual_runs_as_written_in_a_dry_run(tmp_path, command):
    words = shlex.split(command, comments=True)
    words = words[[w.split("=", 1)[0].isidentifier() and "=" in w for w in words].index(False):]  # VAR=... prefixes
    assert words[0] == "snakemake"
    # a dry run in a scratch directory: its options before any `--` (after it, every word is a target)
    cut = words.index("--") if "--" in words else len(words)
    words = [*words[:cut], "-n", "--directory", str(tmp_path), *words[cut:]]
    out = subprocess.run([*SNAKEMAKE, *words[1:]], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "SLURM_CONF": "/dev/null"})
    assert out.returncode == 0, f"{command}\n{out.stdout[-2000:]}{out.stderr[-3000:]}"
    assert "Job stats:" in out.stdout or "Nothing to be done" in out.stdout + out.stderr


def test_the_plan_gives_the_memory_per_rank_replicated_and_sharded():
    from gna.plan import Hardware
    from gna.plan.jobs import Row
    from gna.plan.ranks import rank_lines

    rows = [Row("distill_matrices", "state=16,teacher=l1b", True, 65.8, 103.7, 0.6, True, 8, "replicated", 65.8, 49.9),
            Row("distill_stage", "k=0,stage=3,teacher=l8b", True, 171.0, 400.0, 300.0, True, 8, "replicated", 171.0,
                43.5),
            Row("head_scan", "model=l1b", True, 28.0, 27.2, 1.0, False, 1)]
    text = "\n".join(rank_lines(rows, Hardware(gpu_mem_gb=80), (8, 1), 4))
    assert "| distill_matrices | replicated | 65.8 | 65.8 | 49.9 | 13.0 | 103.7 | yes |" in text
    assert "| distill_stage | replicated | 171.0 | 171.0 | 43.5 | 50.0 | 400.0 | **no** (> 80 GB) |" in text
    assert "does not fit one 80 GB GPU replicated" in text and "`hybrid_distillation.sharding: auto`" in text
    rows[1] = Row("distill_stage", "k=0,stage=3,teacher=l8b", True, 43.5, 400.0, 300.0, True, 8, "sharded", 171.0, 43.5)
    text = "\n".join(rank_lines(rows, Hardware(gpu_mem_gb=80), (8, 1), 4))
    assert "| distill_stage | sharded | 43.5 | 171.0 | 43.5 | 50.0 | 400.0 | yes |" in text
    assert "GB per rank does not fit" not in text
    assert rank_lines(rows[2:], Hardware(), (1, 1), 4) == []  # no distillation: no section


def test_auto_sharding_shards_exactly_when_a_replicated_rank_does_not_fit_and_refuses_what_fits_neither():
    from gna.plan import Hardware
    from gna.plan.ranks import choose_sharding

    hw = Hardware(gpu_mem_gb=80)
    assert not choose_sharding("auto", 65.8, 49.9, hw, (8, 1), "j")
    assert choose_sharding("auto", 171.0, 43.5, hw, (8, 1), "j")
    assert choose_sharding("sharded", 65.8, 49.9, hw, (8, 1), "j")
    assert not choose_sharding("replicated", 171.0, 43.5, hw, (8, 1), "j")
    assert not choose_sharding("auto", 171.0, 0.0, hw, (1, 2), "j")  # one GPU per node: nothing to shard over
    with pytest.raises(ConfigError, match=r"^j: 137.0 GB per rank even sharded over 8 GPUs \(241.1 GB replicated\) "
                                          r"> 80 GB: lower hybrid_distillation.micro_batch_size"):
        choose_sharding("auto", 241.1, 137.0, hw, (8, 1), "j")
    with pytest.raises(ConfigError, match="sharded needs gpus_per_stage > 1"):
        choose_sharding("sharded", 10.0, 0.0, hw, (1, 1), "j")



def test_a_stage_job_runs_in_the_mode_the_plan_chose_replicated_1b_sharded_8b():
    import yaml

    from gna.config.schema import with_defaults
    from gna.plan.jobs import stage_sharding

    paper = yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text())
    option = yaml.safe_load((ROOT / "workflow/configs/options/student-8b.yaml").read_text())
    job = {"k": "20", "state": "64", "stage": "3", "selection": "ranked"}
    assert stage_sharding(with_defaults(paper), "distill_stage", {**job, "teacher": "llama-1b"}) == "replicated"
    paper["experiments"]["hybrid_distillation"].update(option["experiments"]["hybrid_distillation"])
    cfg = with_defaults(paper)
    assert stage_sharding(cfg, "distill_stage", {**job, "teacher": "llama-8b"}) == "sharded"
    assert stage_sharding(cfg, "distill_matrices", {"state": "64", "teacher": "llama-8b"}) == "sharded"
    cfg["experiments"]["hybrid_distillation"]["gradient_sync"] = "last_micro_batch"  # + ~35 GB of gradients
    with pytest.raises(ConfigError, match=r"distill_matrices\[teacher=llama-8b,k=0,state=64\]: .* even sharded"):
        stage_sharding(cfg, "distill_matrices", {"state": "64", "teacher": "llama-8b"})
