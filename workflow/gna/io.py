"""Atomic outputs: a killed job never leaves a half-written file that a later rule would trust.

Everything is written to a temporary name in the destination folder and moved into place
with ``os.replace`` (atomic on one filesystem) only once complete.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success move it onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if directory:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    else:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        # mkstemp/mkdtemp create owner-only files; give the result the usual umask permissions
        # so collaborators on a shared filesystem can read it.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, (0o777 if directory else 0o666) & ~umask)
        if directory:
            # safetensors (0.8.1 on) writes through a temporary file renamed into place, created
            # owner-only whatever the umask (safetensors/safetensors#782): its weights get the mode
            # of any other file the job writes, or a collaborator can read the config and not them.
            for f in tmp.rglob("*.safetensors"):
                os.chmod(f, 0o666 & ~umask)
        if directory and path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    with atomic_path(path) as tmp, open(tmp, mode, **({"encoding": "utf-8"} | kwargs)) as f:
        yield f


def write_json(obj, path) -> Path:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    return Path(path)


def write_csv(df, path) -> Path:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return Path(path)


def sha256_file(path) -> str | None:
    """The hex sha256 of a file's bytes (None when there is no such file)."""
    import hashlib

    path = Path(path)
    if not path.is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_text(text: str, path) -> Path:
    with atomic_open(path) as f:
        f.write(text)
    return Path(path)
