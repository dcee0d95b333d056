"""Errors that name the problem before any work: unknown task names and a Mamba-1
channel_group that does not divide the channels (when the workflow is parsed), a device the
machine lacks (when a model job starts), a model whose files fail to load. Every one names its
config key, and none leaves an output file behind."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gna.config import checks as config_checks

from gna.config import task_names
from gna.cli import main
from gna.jobs.devices import check_device
from gna.errors import ConfigError, DeviceError, ModelLoadError
from gna.models import load_model
from test_cli import MICRO_LLAMA, FakeSnakemake, run_script

ROOT = Path(__file__).resolve().parents[1]
MICRO_TASKS = {"micro_data": str(ROOT / "data/micro/tasks"), "mmlu": "micro_mmlu",
               "knowledge": ["micro_knowledge_cloze", "micro_knowledge_statement"],
               "retrieval": {"lambada": "micro_lambada", "swde": "micro_swde"}, "arc_chat": "micro_arc_chat"}
PAPER_TASKS = {"mmlu": "mmlu", "knowledge": ["arc_challenge", "piqa"], "retrieval": {"swde": "swde", "bbh": "bbh"},
               "chat_tasks": ["arc_challenge_chat"]}
LM_EVAL_NAMES = ["arc_challenge", "arc_challenge_chat", "bbh", "mmlu", "mmlu_continuation", "piqa", "swde"]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


def dry_run(tmp_path, config: dict):
    """``snakemake -n`` on ``config`` in a scratch directory (only the workflow's parse)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path / "work"),
           "--configfile", str(path), "-n", "--cores", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "SLURM_CONF": "/dev/null", "XDG_CACHE_HOME": str(tmp_path / "cache")})


def micro_config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


# ------------------------------------------------------------------ 1. task names

def test_named_tasks_gives_each_task_its_config_key():
    assert task_names.named_tasks(MICRO_TASKS) == [
        ("tasks.mmlu", "micro_mmlu"), ("tasks.knowledge[0]", "micro_knowledge_cloze"),
        ("tasks.knowledge[1]", "micro_knowledge_statement"), ("tasks.retrieval.lambada", "micro_lambada"),
        ("tasks.retrieval.swde", "micro_swde"), ("tasks.arc_chat", "micro_arc_chat")]


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.update(mmlu="micro_mmlx"), "tasks.mmlu: micro_mmlx is not a micro task with data: no "
                                            "micro_mmlx.jsonl in"),
    (lambda t: t["knowledge"].append("micro_knowledge_cloz"), "tasks.knowledge[2]: micro_knowledge_cloz"),
    (lambda t: t["retrieval"].update(swde="swde"), "tasks.retrieval.swde: swde is not a micro task"),
])
def test_an_unknown_micro_task_is_named_with_close_matches(edit, message):
    tasks = {k: (v.copy() if isinstance(v, (list, dict)) else v) for k, v in MICRO_TASKS.items()}
    assert task_names.unknown_task(tasks) is None
    edit(tasks)
    problem = task_names.unknown_task(tasks)
    assert problem.startswith(message)
    if "mmlx" in message:
        assert problem.endswith("close matches: micro_mmlu")


def test_a_micro_task_without_its_file_is_refused(tmp_path):
    shutil.copy(ROOT / "data/micro/tasks/micro_mmlu.jsonl", tmp_path)
    problem = task_names.unknown_task({"micro_data": str(tmp_path), "mmlu": "micro_mmlu", "arc_chat": "micro_arc_chat"})
    assert problem.startswith(f"tasks.arc_chat: micro_arc_chat is not a micro task with data: no micro_arc_chat.jsonl "
                              f"in {tmp_path}")


@pytest.fixture
def fake_lm_eval(monkeypatch, tmp_path):
    """lm-eval's index replaced by a counter over a short list; the cache in a scratch folder."""
    calls = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(task_names, "_lm_eval_version", lambda: "9.9.9")

    def index(version):
        calls.append(version)
        return LM_EVAL_NAMES
    monkeypatch.setattr(task_names, "index_lm_eval_tasks", index)
    return calls


def test_lm_eval_task_names_are_indexed_once_and_cached_by_version(fake_lm_eval, tmp_path):
    assert task_names.unknown_task(PAPER_TASKS) is None
    assert task_names.unknown_task(PAPER_TASKS) is None
    assert fake_lm_eval == ["9.9.9"]  # the second check read the cache
    assert (tmp_path / "cache/gna/lm_eval_tasks-9.9.9.json").is_file()
    problem = task_names.unknown_task({**PAPER_TASKS, "mmlu": "mmlu_typo"})
    assert problem == "tasks.mmlu: mmlu_typo is not a task or group of lm-eval 9.9.9; close matches: mmlu"
    assert fake_lm_eval == ["9.9.9"]


def test_an_lm_eval_that_cannot_be_indexed_skips_the_check_with_a_warning(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(task_names, "_lm_eval_version", lambda: "0.0.0-broken")

    def broken(version):
        raise RuntimeError("indexing lm-eval 0.0.0-broken's tasks failed: ImportError")
    monkeypatch.setattr(task_names, "index_lm_eval_tasks", broken)
    assert task_names.unknown_task({"mmlu": "no_such_task"}) is None
    assert "not checked" in caplog.text and "ImportError" in caplog.text
    monkeypatch.setattr(task_names, "_lm_eval_version", lambda: None)
    assert task_names.unknown_task({"mmlu": "no_such_task"}) is None
    assert "lm-eval is not installed" in caplog.text


@pytest.mark.slow
def test_the_real_lm_eval_index_knows_the_paper_tasks():  # ~10 s: indexes lm-eval's tasks
    names = set(task_names.index_lm_eval_tasks("installed"))
    assert {"mmlu", "arc_challenge_chat", "swde", "bbh", "lambada_openai", "gsm8k"} <= names


def test_an_unknown_task_fails_the_dry_run(tmp_path):
    cfg = micro_config()
    cfg["tasks"]["mmlu"] = "micro_mmlx"
    out = dry_run(tmp_path, cfg)
    assert out.returncode != 0
    assert "config error: tasks.mmlu: micro_mmlx is not a micro task" in out.stdout + out.stderr
    assert not (tmp_path / "work/results").exists() and not (tmp_path / "work/logs").exists()


# ------------------------------------------------------------------ 2. Mamba-1 channel_group

def test_a_channel_group_that_does_not_divide_the_channels_fails_the_dry_run(tmp_path):
    cfg = micro_config()
    cfg["models"]["micro-mamba1"]["adapter_options"]["channel_group"] = 48  # 128 channels
    out = dry_run(tmp_path, cfg)
    assert out.returncode != 0
    assert ("config error: models.micro-mamba1.adapter_options.channel_group = 48 does not divide the Mamba inner "
            "width 128") in out.stdout + out.stderr
    assert not (tmp_path / "work/results").exists()


def test_config_check_of_channel_group_on_a_local_model(tiny_model_dir):
    path = tiny_model_dir("mamba1")  # hidden 32, expand 2: 64 channels
    assert config_checks.structure({"adapter_options": {"channel_group": 16}}, path, "m")[1] == 2 * 64 // 16
    with pytest.raises(ConfigError, match=r"models\.m\.adapter_options\.channel_group = 5 does not divide the Mamba "
                                          r"inner width 64 .*divisors: 1, 2, 4, 8, 16, 32, 64"):
        config_checks.structure({"adapter_options": {"channel_group": 5}}, path, "m")


def test_the_mamba1_adapter_refuses_a_channel_group_at_load(tiny_model_dir, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"adapter_options\.channel_group = 5 does not divide the "
                                          r"Mamba inner width 64"):
        load_model({"path": tiny_model_dir("mamba1"), "adapter_options": {"channel_group": 5}})
    assert main(["scan", tiny_model_dir("mamba1"), "--channel-group", "5", "--out", str(tmp_path / "o")]) == 2
    assert "adapter_options.channel_group = 5" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ 3. device

@NO_CUDA
def test_a_missing_device_is_refused_before_anything_is_loaded():
    # The path does not exist either: the device is checked first, before any file is read.
    with pytest.raises(DeviceError) as e:
        load_model({"path": "/nonexistent/model", "device": "cuda"})
    assert str(e.value) == (f"device: cuda, but torch here has no CUDA (torch {torch.__version__}, CPU only); "
                            "set device: cpu")
    with pytest.raises(DeviceError, match="device: mps, but torch here has no MPS"):
        load_model({"path": "/nonexistent/model", "device": "mps"})
    assert check_device("auto") == "cpu" and check_device("cpu") == "cpu"


class FakeCudaTorch:
    """A torch with a CUDA build and 2 GPUs, for the messages a GPU machine gives."""
    __version__, device = "2.5.1+cu124", torch.device

    class version:
        cuda = "12.4"

    class cuda:
        is_available = staticmethod(lambda: True)
        device_count = staticmethod(lambda: 2)

    class backends:
        mps = None


def test_device_messages_on_a_gpu_machine():
    assert check_device("cuda:1", torch=FakeCudaTorch) == "cuda:1"
    assert check_device("auto", torch=FakeCudaTorch) == "cuda"
    with pytest.raises(DeviceError, match=r"device: cuda:2, but this machine has 2 CUDA devices \(torch 2.5.1\+cu124, "
                                          r"2 CUDA devices \(cuda:0..cuda:1\)\)"):
        check_device("cuda:2", torch=FakeCudaTorch)
    FakeCudaTorch.cuda.is_available = staticmethod(lambda: False)  # CUDA build, GPU hidden
    try:
        with pytest.raises(DeviceError, match="device: cuda, but torch here sees no GPU .*built for CUDA 12.4"):
            check_device("cuda", torch=FakeCudaTorch)
    finally:
        FakeCudaTorch.cuda.is_available = staticmethod(lambda: True)


@NO_CUDA
def test_a_job_on_a_missing_device_stops_at_its_start_and_writes_nothing(tmp_path):
    probe = tmp_path / "probe.jsonl"
    probe.write_text('{"id": "a", "prompt": "k1 2\\nk1 ?", "choices": [" 2"], "answer": 0}\n')
    out = tmp_path / "results/scan"
    smk = FakeSnakemake("head_scan", tmp_path / "logs/scan.log", input=dict(model=MICRO_LLAMA, probe=str(probe)),
                        output=dict(ranking=str(out / "m.ranking.csv"), ga=str(out / "m.ga.csv")),
                        params=dict(spec={"path": MICRO_LLAMA, "dtype": "float32", "device": "cuda"}, batch_size=8,
                                    max_rows=64, classify_top=2, classify_examples=1, threshold=0.3),
                        wildcards=dict(model="m", scan_dir="scan"))
    with pytest.raises(DeviceError, match="device: cuda, but torch here has no CUDA"):
        run_script("head_scan", smk)
    assert not out.exists()
    log = (tmp_path / "logs/scan.log").read_text()
    assert "set device: cpu" in log and "Loading weights" not in log


@NO_CUDA
def test_gna_scan_on_a_missing_device_writes_nothing(tmp_path, capsys):
    assert main(["scan", MICRO_LLAMA, "--device", "cuda", "--out", str(tmp_path / "o")]) == 2
    assert "gna scan: error: --device: cuda, but torch here has no CUDA" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ 4. a model that fails to load

@pytest.fixture
def broken_model(tiny_model_dir, tmp_path):
    """A copy of a saved tiny Llama whose model.safetensors is cut in half (a killed download)."""
    path = tmp_path / "broken-llama"
    shutil.copytree(tiny_model_dir("llama"), path)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return path


def test_a_truncated_safetensors_file_is_a_model_load_error(broken_model):
    with pytest.raises(ModelLoadError) as e:
        load_model({"path": str(broken_model)})
    msg = str(e.value)
    assert msg.startswith(f"cannot load model {str(broken_model)!r}: SafetensorError: ")
    assert "incomplete metadata" in msg or "deserializ" in msg  # the loader's own reason


@pytest.mark.parametrize("damage,reason", [
    (lambda p: (p / "model.safetensors").unlink(), "OSError: Error no file named model.safetensors"),
    (lambda p: (p / "config.json").write_text("{not json"), "JSONDecodeError"),
    (lambda p: (p / "config.json").unlink(), "has no config.json"),
])
def test_missing_files_and_a_bad_config_name_the_reason(tiny_model_dir, tmp_path, damage, reason):
    path = tmp_path / "llama"
    shutil.copytree(tiny_model_dir("llama"), path)
    damage(path)
    with pytest.raises(ModelLoadError, match=reason) as e:
        load_model({"path": str(path)})
    assert str(path) in str(e.value)


def test_a_job_names_the_models_config_key_and_writes_nothing(broken_model, tmp_path):
    out = tmp_path / "results/scan"
    probe = tmp_path / "probe.jsonl"
    probe.write_text('{"id": "a", "prompt": "k1 2\\nk1 ?", "choices": [" 2"], "answer": 0}\n')
    smk = FakeSnakemake("head_scan", tmp_path / "logs/scan.log", input=dict(model=str(broken_model), probe=str(probe)),
                        output=dict(ranking=str(out / "b.ranking.csv"), ga=str(out / "b.ga.csv")),
                        params=dict(spec={"path": str(broken_model), "dtype": "float32", "device": "cpu"},
                                    batch_size=8, max_rows=64, classify_top=2, classify_examples=1, threshold=0.3),
                        wildcards=dict(model="b", scan_dir="scan"),
                        config={"models": {"b": {"path": "broken-llama"}, "other": {"random": {"family": "llama"}}}})
    with pytest.raises(ModelLoadError, match=rf"cannot load model models\.b \({broken_model}\): SafetensorError"):
        run_script("head_scan", smk)
    assert not out.exists()  # no output, not even a temporary file
    assert "models.b" in (tmp_path / "logs/scan.log").read_text()


def test_gna_describe_of_a_truncated_model_exits_2_with_the_reason(broken_model, capsys):
    assert main(["describe", str(broken_model)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gna describe: error: cannot load model {str(broken_model)!r}: SafetensorError")
