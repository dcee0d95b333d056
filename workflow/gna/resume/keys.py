"""What a job's partial state is keyed by, and where it lives.

The key (:func:`job_key`) is a sha256 of everything the finished units depend on: the rule, its
wildcards, params and outputs, each input file (its bytes; for a file over ``HASH_LIMIT`` its size
and modification time, as reading a model's weights through would cost minutes), the source of the
whole ``gna`` package and the versions of torch, transformers and lm-eval. A change to any of them
starts the job afresh. The state lives in ``.partial/<name of the first output>/`` beside that
output (:func:`partial_dir`): in the job's own results folder, so it survives Snakemake removing a
failed job's declared outputs and goes wherever the results go, never inside an output.
"""
from __future__ import annotations

import functools
import hashlib
import json
from importlib import metadata
from pathlib import Path

from .store import PARTIAL

HASH_LIMIT = 64 << 20
PACKAGES = ("torch", "transformers", "lm_eval")


def partial_dir(outputs) -> Path | None:
    """Where a job with ``outputs`` keeps its partial state (``None``: a job with no outputs)."""
    outputs = [str(o) for o in outputs]
    if not outputs:
        return None
    first = Path(outputs[0])
    return first.parent / PARTIAL / first.name


def file_digest(path) -> list:
    """A file's identity (a folder's: each file under it, by relative name): sha256 of its bytes,
    or its size and modification time past ``HASH_LIMIT``; ``None`` for a path that is not there."""
    path = Path(path)
    if path.is_dir():
        return [[str(p.relative_to(path)), file_digest(p)] for p in sorted(path.rglob("*")) if p.is_file()]
    if not path.is_file():
        return None
    st = path.stat()
    if st.st_size > HASH_LIMIT:
        return ["size+mtime", st.st_size, st.st_mtime_ns]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return ["sha256", h.hexdigest()]


@functools.cache
def code_digest() -> str:
    """sha256 of the ``gna`` package's Python source, file by file."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def versions(packages=PACKAGES) -> dict[str, str]:
    """Each of ``packages``' installed version, or ``absent``."""
    out = {}
    for p in packages:
        try:
            out[p] = metadata.version(p.replace("_", "-"))
        except metadata.PackageNotFoundError:
            out[p] = "absent"
    return out


def job_key(rule: str, inputs, params, wildcards, outputs) -> str:
    """The key of a job's partial state (see the module docstring). ``inputs``/``params``/
    ``wildcards``: Snakemake's (named items kept), ``outputs``: its output paths."""
    def named(container):
        items = container.items() if hasattr(container, "items") else []
        return {str(k): v for k, v in items}

    files = [[str(p), file_digest(p)] for p in inputs]
    blob = json.dumps(dict(rule=rule, inputs=files, named_inputs={k: str(v) for k, v in named(inputs).items()},
                           params=named(params), wildcards=named(wildcards), outputs=[str(o) for o in outputs],
                           code=code_digest(), versions=versions()),
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()
