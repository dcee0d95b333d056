"""Data-parallel distillation (gna.hybrid.distributed) with 2 gloo ranks on the CPU, started by torchrun
as a stage job starts them: the ranks' weights equal one process' with twice the accumulation, a
2-rank run cut mid-way resumes (on 2 ranks, or on 1) to the uninterrupted run's weights, and a rank
that fails fails the launch with its error and leaves no output.

One launch runs this file as the ranks' program (``__main__`` below) and does every run, the failing
one last, so the default suite pays torch's import in two ranks once (about 10 s here)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gna.hybrid.distillation import distill
from gna.hybrid.student import build_student
from gna.models.tiny import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
B, T, STEPS = 4, 12, 5   # effective batch 4 rows: 2 per rank x micro-batches of 1 (2 accumulated) on 2 ranks,
                          # 4 micro-batches of 1 on one rank


def teacher():
    torch.manual_seed(0)
    return build_tiny_model("llama", num_key_value_heads=2, vocab_size=64, num_hidden_layers=2).eval()


def student(t, stage):
    return build_student(t, [(0, 1)] if stage > 1 else [], 8, chunk_size=4, seed=1)


def data(step: int) -> dict:
    """The batch of step ``step``: (B, T) ids, one right-padded and one left-padded row (the means'
    denominators are then not B x T, and the ranks' token counts differ)."""
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(3, 64, (B, T), generator=g)
    am = torch.ones_like(ids)
    am[1, -5:] = 0
    am[2, :3] = 0
    return {"input_ids": ids, "attention_mask": am}


class Killed(Exception):
    pass


def cut_at(step):
    def batch(s):
        if s == step:
            raise Killed(f"killed at step {s}")
        return data(s)
    return batch


def run(t, stage, out_dir, stream=data, **kw):
    s = student(t, stage)
    state = distill(t, s, stage, stream, STEPS, 3e-3, out_dir, save_every=2, micro_batch_size=1, grad_clip=None,
                    weight_decay=0.1, vocab_chunk=8 if stage == 3 else None, **kw)
    return s, state


def ranks(*args, nproc=2, timeout=300):
    """This file as ``nproc`` torchrun ranks with ``args``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", __file__,
           *map(str, args)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'workflow'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def close(a: dict, b: dict, tol: float) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].is_floating_point()) <= tol


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    return out, ranks(out)


@pytest.fixture(scope="module")
def two_ranks(launch):
    out, done = launch
    assert (out / "resumed.json").is_file(), done.stdout[-3000:] + done.stderr[-5000:]
    return out


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_two_ranks_equal_one_rank_with_twice_the_accumulation(two_ranks, tmp_path, stage):
    torch.set_num_threads(1)
    one, state = run(teacher(), stage, tmp_path)
    got = torch.load(two_ranks / f"stage{stage}.pt", weights_only=True)
    ref = one.state_dict()
    moved = [k for k in ref if not torch.equal(ref[k], student(teacher(), stage).state_dict()[k])]
    assert moved, "the stage trained nothing"
    assert close(got, ref, 1e-6)
    info = json.loads((two_ranks / f"stage{stage}.json").read_text())
    assert info["step"] == STEPS and info["tokens"] == state["tokens"]  # every row of every batch, once
    assert max(abs(a - b) for a, b in zip(info["losses"], state["losses"])) < 1e-5
    assert info["checkpoints"] == ["step-00000004", "step-00000005"]  # rank 0's, nothing else


def test_an_interrupted_two_rank_run_resumes_to_the_same_weights_on_two_ranks_or_one(two_ranks, tmp_path):
    whole = torch.load(two_ranks / "stage3.pt", weights_only=True)
    resumed = torch.load(two_ranks / "resumed.pt", weights_only=True)
    info = json.loads((two_ranks / "resumed.json").read_text())
    assert info["resumed_from"] == 2
    # the same ranks redo the same arithmetic: bit for bit
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    # a cut 2-rank run resumed by one process: the remaining rows, once each, to the rounding of the sums
    torch.set_num_threads(1)
    one, state = run(teacher(), 3, two_ranks / "cut_for_one")
    assert state["resumed_from"] == 4 and state["tokens"] == info["tokens"]
    # every attempt's world size is kept (distill.json's "attempts"), not only the last one's
    assert info["attempts"] == [{"ranks": 2, "from_step": 0}, {"ranks": 2, "from_step": 2}]
    assert state["attempts"] == [{"ranks": 2, "from_step": 0}, {"ranks": 1, "from_step": 4}]
    assert close(one.state_dict(), whole, 1e-6)


def test_a_failing_rank_fails_the_stage_with_its_error_and_no_output(two_ranks, launch):
    _, done = launch
    assert done.returncode != 0
    assert "rank 1 fails on purpose" in done.stdout + done.stderr
    assert (two_ranks / "fail").is_dir() and not list((two_ranks / "fail").glob("*out*"))


def test_a_batch_that_does_not_split_over_the_ranks_is_refused():
    from gna.errors import ConfigError
    from gna.hybrid.study.stage_ranks import check_split
    from gna.hybrid.distributed import World

    with pytest.raises(ConfigError, match="36 rows does not split over gpus_per_stage x nodes = 8 ranks"):
        check_split([64, 128, 36], 8)
    check_split([64, 128], 8)
    with pytest.raises(ConfigError, match="multiple of gpus_per_stage x nodes"):
        World(0, 3).rows(4)
    assert [World(r, 2).rows(4) for r in (0, 1)] == [slice(0, 2), slice(2, 4)]


def test_a_partial_last_batch_of_a_sized_stream_is_refused_before_the_first_step(tmp_path, monkeypatch):
    from gna.errors import ConfigError
    from gna.hybrid import distillation
    from gna.hybrid.distributed import World

    monkeypatch.setattr(distillation, "current", lambda: World(0, 2))  # rank 0 of 2, no process group needed
    stream = [data(0), data(1), {k: v[:3] for k, v in data(2).items()}]  # the last batch: 3 rows
    with pytest.raises(ConfigError, match="a batch of 3 rows does not split over 2 ranks"):
        run(teacher(), 1, tmp_path / "out", stream=stream)
    assert not list((tmp_path / "out").glob("step-*"))  # no step was taken, none is lost


def test_the_launch_command_is_torchrun_on_one_node_and_srun_on_several(monkeypatch):
    from types import SimpleNamespace

    from gna.errors import ConfigError
    from gna.hybrid import stage_launch as R

    cmd, env = R.launch_command("a.json", 8, 1)
    assert cmd[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=8", "-m",
                       "gna.hybrid.stage_job", "a.json"] and env == {}
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(ConfigError, match="nodes = 2: a stage on several nodes runs inside a Slurm job"):
        R.launch_command("a.json", 8, 2)
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)  # the executor plugin drops it
    monkeypatch.setattr(R.shutil, "which", lambda exe: f"/usr/bin/{exe}")
    asked = []

    def slurm(args, **kw):
        asked.append(args)
        return SimpleNamespace(stdout="gpu[07-08]\n" if args[0] == "squeue" else "gpu07\ngpu08\n")
    monkeypatch.setattr(R.subprocess, "run", slurm)
    cmd, env = R.launch_command("a.json", 8, 2, cpus=6)
    assert asked == [["squeue", "-h", "-j", "1234", "-o", "%N"], ["scontrol", "show", "hostnames", "gpu[07-08]"]]
    # the CPUs per rank on the inner srun itself: since Slurm 22.05 it does not inherit --cpus-per-task
    assert cmd[:7] == ["srun", "--jobid=1234", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks-per-node=8",
                       "--ntasks=16", "--cpus-per-task=6"] and cmd[-3:] == ["-m", "gna.hybrid.stage_job", "a.json"]
    assert env == {"MASTER_ADDR": "gpu07", "MASTER_PORT": str(29500 + 1234), "SRUN_CPUS_PER_TASK": "6"}


# --- the ranks ---------------------------------------------------------------------------------------

def _train(out: Path) -> None:
    from gna.hybrid.distributed import current

    world = current()
    t = teacher()
    for stage in (1, 2, 3):
        s, state = run(t, stage, out / f"ckpt{stage}")
        if world.main:
            files = sorted(p.name for p in (out / f"ckpt{stage}").iterdir())
            torch.save(s.state_dict(), out / f"stage{stage}.pt")
            (out / f"stage{stage}.json").write_text(json.dumps({**state, "checkpoints": files}))
    # stage 3 cut after 3 steps (the last checkpoint: step 2), then resumed on the same 2 ranks
    with pytest.raises(Killed):
        run(t, 3, out / "cut", stream=cut_at(3))
    s, state = run(t, 3, out / "cut")
    if world.main:
        torch.save(s.state_dict(), out / "resumed.pt")
        (out / "resumed.json").write_text(json.dumps(state))
    # and one cut after step 4 (its checkpoint), left for the test to resume on one rank
    with pytest.raises(Killed):
        run(t, 3, out / "cut_for_one", stream=cut_at(4))


def _fail(out: Path) -> None:
    """A stage job whose rank 1 dies at step 2; rank 0 would write ``out/out`` (as gna.hybrid.stage_job)."""
    from gna.hybrid.distributed import current
    from gna.io import atomic_path

    world = current()

    def stream(step):
        if step == 2 and world.rank == 1:
            raise RuntimeError("rank 1 fails on purpose")
        return data(step)

    t = teacher()
    s, _ = run(t, 2, out / "ckpt", stream=stream)
    if world.main:
        with atomic_path(out / "out", directory=True) as tmp:
            torch.save(s.state_dict(), tmp / "student.pt")


if __name__ == "__main__":
    from gna.hybrid.distributed import process_group

    torch.set_num_threads(1)
    with process_group(timeout_s=120):
        _train(Path(sys.argv[1]))
        _fail(Path(sys.argv[1]) / "fail")
