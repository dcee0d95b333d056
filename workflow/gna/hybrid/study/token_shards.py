"""Distillation tokens prepared once, read offline: packed rows of the web stream in shard files.

Paper-scale distillation streams fineweb-edu and finemath from the Hub. Streaming inside each
stage ties every GPU job to the network (the workflow runs offline), re-tokenizes the stream
for every stage and every student, and a resumed stage has to replay the stream up to its step.
Rule ``distill_tokens`` instead writes the rows a job will read, once per teacher tokenizer and
part (``align``, ``stage1``-``stage3``, ``heldout``), where the Hub is reachable:

    <dir>/index.json          {"seq_len", "rows", "dtype", "shards": [{"file", "rows"}], "source": {...}}
    <dir>/shard-00000.npy     uint32 (rows, seq_len): token ids (Llama-3's 128,256 ids need 32 bits)

:class:`TokenShards` serves them as ``step -> batch`` (random access, memory-mapped): the batch
of step ``s`` is rows ``[s * batch_size, (s + 1) * batch_size)``, so a resumed stage reads the
step it stopped at without reading anything before it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

from ...errors import ConfigError
from ...io import atomic_path

INDEX = "index.json"
DTYPE = np.uint32


# --------------------------------------------------------------------------------- writing, reading


def write_token_shards(batches: Iterable[dict], out_dir, rows: int, rows_per_shard: int = 8192,
                       source: dict | None = None, progress: bool = True) -> dict:
    """Write the first ``rows`` rows of ``batches`` (dicts with ``input_ids`` (batch, seq_len))
    into ``out_dir`` as shard files plus ``index.json``; atomically: the folder appears complete
    or not at all. Returns the index. A stream that ends before ``rows`` rows is an error."""
    from tqdm import tqdm

    if rows < 1 or rows_per_shard < 1:
        raise ConfigError(f"token shards need rows >= 1 and rows_per_shard >= 1, got {rows}, {rows_per_shard}")
    index = {"rows": 0, "seq_len": None, "dtype": np.dtype(DTYPE).name, "shards": [], "source": source or {}}
    with atomic_path(out_dir, directory=True) as tmp, tqdm(total=rows, unit="row", disable=not progress,
                                                           desc=f"tokens -> {Path(out_dir).name}") as bar:
        pending: list[np.ndarray] = []

        def flush(block: list[np.ndarray]) -> None:
            arr = np.concatenate(block)
            name = f"shard-{len(index['shards']):05d}.npy"
            np.save(tmp / name, arr)
            index["shards"].append({"file": name, "rows": int(arr.shape[0])})

        held = 0
        for batch in batches:
            ids = np.asarray(batch["input_ids"])
            if ids.ndim != 2:
                raise ValueError(f"a batch's input_ids must be (batch, seq_len), got shape {ids.shape}")
            if index["seq_len"] is None:
                index["seq_len"] = int(ids.shape[1])
            elif ids.shape[1] != index["seq_len"]:
                raise ValueError(f"rows of {ids.shape[1]} tokens after rows of {index['seq_len']}")
            if ids.min() < 0 or ids.max() > np.iinfo(DTYPE).max:
                raise ValueError("token ids out of the uint32 range")
            ids = ids[: rows - index["rows"] - held].astype(DTYPE)
            pending.append(ids)
            held += ids.shape[0]
            bar.update(ids.shape[0])
            while held >= rows_per_shard:
                block = np.concatenate(pending)
                flush([block[:rows_per_shard]])
                index["rows"] += rows_per_shard
                pending, held = [block[rows_per_shard:]], held - rows_per_shard
            if index["rows"] + held >= rows:
                break
        if held:
            flush(pending)
            index["rows"] += held
        if index["rows"] < rows:
            raise ConfigError(f"the data stream ended after {index['rows']} rows; {rows} were asked for "
                              f"({Path(out_dir)}): add sources or lower the stage's tokens")
        (tmp / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return index


class TokenShards:
    """``step -> {"input_ids": (batch_size, seq_len) int64}`` over a folder of token shards."""

    def __init__(self, path, batch_size: int):
        self.path = Path(path)
        index_file = self.path / INDEX
        if not index_file.is_file():
            raise FileNotFoundError(f"{self.path} holds no prepared distillation tokens ({INDEX} missing): "
                                    "run the workflow's distill_tokens rule for it")
        self.index = json.loads(index_file.read_text())
        self.batch_size, self.seq_len, self.rows = int(batch_size), int(self.index["seq_len"]), int(self.index["rows"])
        self._shards = [np.load(self.path / s["file"], mmap_mode="r") for s in self.index["shards"]]
        self._starts = np.cumsum([0] + [s.shape[0] for s in self._shards])

    @property
    def steps(self) -> int:
        """Whole batches the folder holds."""
        return self.rows // self.batch_size

    def rows_at(self, start: int, stop: int) -> np.ndarray:
        if not 0 <= start <= stop <= self.rows:
            raise IndexError(f"rows [{start}, {stop}) of {self.path}, which holds {self.rows}: a stage asked for "
                             "more steps than its tokens were prepared for (rerun distill_tokens)")
        parts, at = [], start
        while at < stop:
            i = int(np.searchsorted(self._starts, at, side="right")) - 1
            take = min(stop, int(self._starts[i + 1])) - at
            parts.append(np.asarray(self._shards[i][at - self._starts[i]: at - self._starts[i] + take]))
            at += take
        return np.concatenate(parts) if parts else np.zeros((0, self.seq_len), DTYPE)

    def __call__(self, step: int) -> dict:
        return self.rows_of_step(step, slice(0, self.batch_size))

    def rows_of_step(self, step: int, part: slice) -> dict:
        """Rows ``part`` of step ``step``'s batch, read alone (a rank's share: gna.hybrid.distributed)."""
        start = int(step) * self.batch_size
        ids = self.rows_at(start + part.start, start + part.stop)
        import torch

        return {"input_ids": torch.from_numpy(ids.astype(np.int64))}
