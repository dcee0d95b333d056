"""Resumable training state of a micro model: ``<out_dir>.ckpt/step-<n>/state.pt``.

Each checkpoint is written whole into a temporary folder and renamed (:func:`gna.io.atomic_path`),
so a kill at any moment leaves only complete ones; the newest is kept, older ones removed. A
checkpoint records the fingerprint of the resolved training configuration and is refused for
another one (resuming a different recipe would silently mix two runs).
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import torch

from ..io import atomic_path

log = logging.getLogger(__name__)


def fingerprint(resolved: dict[str, Any]) -> str:
    """sha256 of the resolved configuration (what makes two runs the same run)."""
    return hashlib.sha256(json.dumps(resolved, sort_keys=True, default=str).encode()).hexdigest()


class TrainCheckpoints:
    """The checkpoints of the training run that writes ``out_dir``."""

    def __init__(self, out_dir: str | Path, resolved: dict[str, Any]):
        out = Path(out_dir)
        self.root = out.with_name(f"{out.name}.ckpt")
        self.fingerprint = fingerprint(resolved)

    def _complete(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted((p for p in self.root.glob("step-*") if (p / "state.pt").is_file()),
                      key=lambda p: int(p.name.split("-")[1]))

    def latest(self) -> dict[str, Any] | None:
        """The newest complete checkpoint of this configuration, or None (a fresh start)."""
        found = self._complete()
        if not found:
            return None
        state = torch.load(found[-1] / "state.pt", weights_only=False)
        if state.get("fingerprint") != self.fingerprint:
            log.warning("%s holds a checkpoint of another training configuration: starting afresh", self.root)
            self.clear()
            return None
        return state

    def save(self, step: int, state: dict[str, Any]) -> Path:
        dest = self.root / f"step-{step:06d}"
        with atomic_path(dest, directory=True) as tmp:
            torch.save({**state, "fingerprint": self.fingerprint}, tmp / "state.pt")
        for older in self._complete()[:-1]:
            shutil.rmtree(older, ignore_errors=True)
        return dest

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
