"""The conda environments resolve with the versions pyproject.toml asks for: the GPU one gets a CUDA
torch new enough for transformers 5 (through pip: the `pytorch` conda channel ends at 2.5.1) and
the fused kernels, installed after torch and built against it."""
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
TORCH_FLOOR = Version("2.6")  # transformers 5 disables PyTorch below 2.6


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(lines) -> dict[str, Requirement]:
    reqs = [Requirement(x) for x in lines if not x.startswith("-")]
    return {r.name: r for r in reqs}


def env(name: str) -> tuple[list, list, list]:
    """(channels, conda dependencies, pip lines) of envs/<name>."""
    spec = yaml.safe_load((ROOT / "envs" / name).read_text())
    conda = [d for d in spec["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict))
    return spec["channels"], conda, pip


def test_pyproject_asks_for_a_torch_transformers_5_runs_on():
    torch = requirements(pyproject()["dependencies"])["torch"]
    assert not torch.specifier.contains("2.5.1") and torch.specifier.contains(str(TORCH_FLOOR))


def test_gpu_env_installs_cuda_torch_at_the_projects_pins_and_the_kernels():
    channels, conda, pip = env("gpu.yaml")
    assert "pytorch" not in channels and not any(re.match(r"(pytorch|pytorch-cuda)\b", d) for d in conda)
    assert "-e ../" in pip  # the project, with every pin of pyproject.toml
    torch = requirements(pip)["torch"]
    project_torch = requirements(pyproject()["dependencies"])["torch"]
    assert str(torch.specifier) == str(project_torch.specifier)  # pip's choice is pyproject's range
    # the kernels: installed after torch, against it (no build isolation), at the `gpu` extra's pins
    post = (ROOT / "envs/gpu.post-deploy.sh").read_text()
    install = next(line for line in post.splitlines() if line.startswith("pip install"))
    assert "--no-build-isolation" in install
    pinned = requirements(re.findall(r'"([^"]+)"', install))
    extra = requirements(pyproject()["optional-dependencies"]["gpu"])
    assert set(pinned) == set(extra) == {"mamba-ssm", "causal-conv1d"}
    assert all(str(pinned[n].specifier) == str(extra[n].specifier) and str(extra[n].specifier).startswith("==")
               for n in extra)
    assert "mamba_chunk_scan_combined" in post and "causal_conv1d_fn" in post  # checked as gna imports them


def test_cpu_env_pins_a_torch_pyproject_accepts():
    _, _, pip = env("cpu.yaml")
    torch = requirements(pip)["torch"]
    version = str(torch.specifier).removeprefix("==")
    assert requirements(pyproject()["dependencies"])["torch"].specifier.contains(version)


def test_ci_tests_the_newest_and_the_lowest_supported_transformers_and_lm_eval():
    """No upper bound that excludes a new release; the lower bounds are what .ci/run installs for
    `pytest -m oldest`, beside the newest releases for the whole suite. scipy (the statistics) is
    declared, not left to arrive through lm-eval's own dependencies, and pinned to its lowest too."""
    import subprocess
    import sys

    deps = requirements(pyproject()["dependencies"])
    pins = subprocess.run([sys.executable, str(ROOT / ".ci/lowest_pins.py")], capture_output=True, text=True,
                          check=True).stdout.split()
    for name in ("transformers", "lm-eval", "scipy"):
        spec = deps[name].specifier
        assert [s.operator for s in spec] == [">="], (name, str(spec))
        assert f"{name}=={next(iter(spec)).version}" in pins
    ci = (ROOT / ".ci/run").read_text()
    assert "lowest_pins.py" in ci and "pytest -m oldest" in ci
