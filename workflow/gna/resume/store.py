"""A job's partial state: finished units of work (a scan's chunk of heads, an evaluation's batch of
requests), each stored as one sqlite transaction as it finishes.

A job stopped at any point (SIGKILL included) loses at most the unit it was working on: sqlite
rolls an unfinished transaction back when the file is next opened, so a torn write never reads
back. The state lives in a directory the job owns, created with the caller's umask; a ``key`` file
there names what it was computed for (:mod:`gna.resume.keys`), and state of another key is
removed, never resumed from. :func:`resuming` removes the directory when the job succeeds.

A resumable loop asks :func:`section` for its namespace: the ``n``-th section of a name in a job
(the job is deterministic, so the ``n``-th scan of a resumed job is the ``n``-th scan of the
stopped one) plus a digest of what the loop was given, so another call never reads this one's units.

``GNA_PARTIAL_STOP_AFTER=N`` (tests only): the process kills itself (SIGKILL) once it has stored
``N`` units, a stop at a known point.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import signal
import sqlite3
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)
_CURRENT: ContextVar["Callable[[], PartialState] | None"] = ContextVar("gna_partial_state", default=None)
PARTIAL = ".partial"  # the folder beside a job's outputs that holds its state (gna.resume.keys)
_STORED = [0]  # units stored by this process, for GNA_PARTIAL_STOP_AFTER
COST = "/cpu_s"  # a section's CPU seconds per unit live in the section of its name with this suffix
NOTHING_REUSED = {"units": 0, "cpu_s": 0.0, "unpriced_units": 0}  # reused_cost's tally before any reuse


def fingerprint(obj) -> str:
    """A sha256 of plain data: numbers, strings, lists, dicts, and arrays or tensors by their bytes."""
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def _feed(h, obj) -> None:
    if hasattr(obj, "detach"):  # a torch tensor
        obj = obj.detach().cpu().numpy()
    if hasattr(obj, "tobytes") and hasattr(obj, "dtype"):  # a numpy array
        h.update(f"array {obj.dtype} {obj.shape};".encode())
        h.update(obj.tobytes())
    elif isinstance(obj, dict):
        h.update(b"{")
        for k in sorted(obj, key=repr):
            _feed(h, k)
            _feed(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for v in obj:
            _feed(h, v)
        h.update(b"]")
    else:
        h.update(json.dumps(obj, default=repr).encode() + b";")


class Section:
    """One resumable loop's finished units: ``get(key)`` (``None`` if not finished), ``put(key, value)``."""

    def __init__(self, state: "PartialState", name: str):
        self.state, self.name = state, name

    def get(self, key: str):
        row = self.state.db.execute("SELECT value FROM units WHERE section = ? AND key = ?",
                                    (self.name, key)).fetchone()
        return None if row is None else pickle.loads(row[0])

    def put(self, key: str, value, cpu_s: float | None = None) -> None:
        """Keep a finished unit; ``cpu_s``: the CPU seconds it took, for a resumed job to count them
        (:meth:`reused`)."""
        with self.state.db:  # one transaction: the unit is stored whole or not at all
            self.state.db.execute("INSERT OR REPLACE INTO units VALUES (?, ?, ?)",
                                  (self.name, key, pickle.dumps(value, protocol=4)))
            if cpu_s is not None:
                self.state.db.execute("INSERT OR REPLACE INTO units VALUES (?, ?, ?)",
                                      (self.name + COST, key, pickle.dumps(float(cpu_s), protocol=4)))
        _STORED[0] += 1
        stop = os.environ.get("GNA_PARTIAL_STOP_AFTER")
        if stop and _STORED[0] >= int(stop):
            os.kill(os.getpid(), signal.SIGKILL)


    def kept(self, key: str, compute: Callable[[], object]):
        """The unit ``key`` a stopped run finished (counted by :meth:`reused`), else ``compute()``,
        kept with the CPU seconds it took."""
        got = self.get(key)
        if got is None:
            start = time.process_time()
            got = compute()
            self.put(key, got, cpu_s=time.process_time() - start)
        else:
            self.reused(key)
        return got

    def reused(self, key: str) -> None:
        """Count a unit a stopped run finished, taken instead of run: its CPU seconds where that run
        kept them, else one unit whose cost is unknown (:func:`reused_cost`)."""
        row = self.state.db.execute("SELECT value FROM units WHERE section = ? AND key = ?",
                                    (self.name + COST, key)).fetchone()
        tally = self.state.reused_tally
        tally["units"] += 1
        if row is None:
            tally["unpriced_units"] += 1
        else:
            tally["cpu_s"] += pickle.loads(row[0])


class PartialState:
    """A job's finished units in ``directory`` (``state.sqlite``), for ``key``; state of another
    key found there is removed first. ``resumed``: units were there to resume from."""

    def __init__(self, directory, key: str):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)  # the caller's umask: the job's own
        key_file = self.directory / "key"
        if not key_file.is_file() or key_file.read_text() != key:
            for p in self.directory.iterdir():
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            tmp = self.directory / "key.tmp"
            tmp.write_text(key)
            os.replace(tmp, key_file)
        try:
            self.db = self._open()
        except sqlite3.DatabaseError as e:  # a file the machine's crash tore: start afresh
            log.warning("partial state in %s unreadable (%s): starting afresh", self.directory, e)
            for p in self.directory.glob("state.sqlite*"):
                p.unlink()
            self.db = self._open()
        self.resumed = self.db.execute("SELECT count(*) FROM units WHERE section NOT LIKE ?",
                                       ("%" + COST,)).fetchone()[0]
        self.reused_tally = dict(NOTHING_REUSED)
        self._seen: dict[str, int] = {}

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.directory / "state.sqlite", isolation_level=None)
        # no fsync per unit (10 ms each, more than a micro model's chunk): a killed process loses
        # nothing the OS was handed, and a crash of the machine itself is caught by the check below
        db.execute("PRAGMA synchronous = OFF")
        db.execute("CREATE TABLE IF NOT EXISTS units (section TEXT, key TEXT, value BLOB, PRIMARY KEY (section, key))")
        if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            db.close()
            raise sqlite3.DatabaseError("quick_check failed")
        return db

    def section(self, name: str, *given) -> Section:
        n = self._seen.get(name, 0)
        self._seen[name] = n + 1
        return Section(self, f"{name}#{n}:{fingerprint(list(given))[:16]}")

    def close(self) -> None:
        self.db.close()


@contextmanager
def resuming(directory, key: str | Callable[[], str]) -> Iterator[None]:
    """Within the block, resumable loops keep their finished units in ``directory`` (``None``: they
    do not); ``key`` (or a function computing it, called only when a loop first asks) is what the
    state is for. On success the directory is removed; on an error it stays, to resume from."""
    if directory is None:
        yield
        return
    opened: list[PartialState] = []

    def open_state() -> PartialState:
        if not opened:
            opened.append(PartialState(directory, key() if callable(key) else key))
            if opened[0].resumed:
                log.info("resuming: %d finished units in %s", opened[0].resumed, directory)
        return opened[0]

    open_state.opened = opened
    token = _CURRENT.set(open_state)
    try:
        yield
    except BaseException:
        if opened:
            opened[0].close()
        raise
    else:
        if opened:
            opened[0].close()
            remove(directory)
    finally:
        _CURRENT.reset(token)


def remove(directory) -> None:
    """Remove a job's state, and the ``.partial`` folder holding it where that is left empty."""
    directory = Path(directory)
    shutil.rmtree(directory, ignore_errors=True)
    if directory.parent.name == PARTIAL:
        try:
            directory.parent.rmdir()
        except OSError:
            pass  # not empty: another job's state


def section(name: str, *given) -> Section | None:
    """The next section ``name`` of the running job's state for a loop given ``given`` (its
    settings and inputs, hashed); ``None`` outside :func:`resuming`."""
    opener = _CURRENT.get()
    return None if opener is None else opener().section(name, *given)


def reused_cost() -> dict:
    """What the running job took from a stopped run instead of running it: ``units``, their ``cpu_s``
    (the CPU seconds that run spent on them, where it kept them) and ``unpriced_units`` (kept by code
    that did not count them: ``cpu_s`` is then short of theirs). All zero outside :func:`resuming`
    or where nothing was reused."""
    opener = _CURRENT.get()
    opened = getattr(opener, "opened", None)
    return dict(opened[0].reused_tally) if opened else dict(NOTHING_REUSED)
