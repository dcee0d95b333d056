"""Do the task names of a study config exist? Checked when the workflow is parsed (from
:mod:`gna.config.checks`), so a typo in ``tasks.mmlu`` fails the dry run, not an evaluation job
hours into a cluster run.

* Micro study (``tasks.micro_data`` set): a task is one of the micro tasks
  (:data:`gna.micro.tasks.TASKS`, the names :func:`gna.micro.lm_eval_tasks.task_configs` accepts)
  whose ``<name>.jsonl`` is in the task directory.
* Paper scale: a task (or group) lm-eval knows. Indexing lm-eval's ~14,700 tasks takes ~10 s,
  too slow for every ``snakemake`` call, so the list of names is cached on disk, keyed by
  lm-eval's version (``$XDG_CACHE_HOME/gna/`` or ``~/.cache/gna/``). If lm-eval is missing or its
  index fails, the check is skipped with a warning: it guards against typos, it must not stop a
  workflow whose evaluations would report the problem themselves.

Stdlib only at import: every ``snakemake`` call imports this.
"""
from __future__ import annotations

import difflib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

ROLES = ("mmlu", "knowledge", "retrieval", "arc_regular", "arc_chat", "chat_tasks")
log = logging.getLogger(__name__)


def named_tasks(tasks: dict) -> list[tuple[str, str]]:
    """``(config key, task name)`` of every task a study config names in ``tasks``' roles, e.g.
    ``("tasks.mmlu", "mmlu")``, ``("tasks.knowledge[1]", "arc_easy")``, ``("tasks.retrieval.swde", "swde")``."""
    out = []

    def add(key, value):
        if isinstance(value, str):
            out.append((key, value))
        elif isinstance(value, dict):
            for k, v in value.items():
                add(f"{key}.{k}", v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                add(f"{key}[{i}]", v)

    for role in ROLES:
        if tasks.get(role):
            add(f"tasks.{role}", tasks[role])
    return out


def micro_task_names(data_dir) -> set[str]:
    """The micro tasks the pipeline can evaluate from ``data_dir``: known and with their JSONL there."""
    from ..micro.tasks import TASKS

    d = Path(data_dir)
    return {t for t in TASKS if (d / f"{t}.jsonl").is_file()}


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gna"


def _lm_eval_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("lm-eval")
    except metadata.PackageNotFoundError:
        return None


# Run in a child process: importing lm-eval (torch, transformers, datasets) inside the process
# that parses the workflow would cost its memory and may reconfigure its logging.
_INDEX = ("import json, sys\n"
          "from lm_eval.tasks import TaskManager\n"
          "json.dump(sorted(TaskManager().all_tasks), open(sys.argv[1], 'w'))\n")


def index_lm_eval_tasks(version: str) -> list[str]:
    """Every task and group name lm-eval registers (the ~10 s index, in a child process)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gna-lm-eval-index-") as tmp:
        out = Path(tmp) / "names.json"
        proc = subprocess.run([sys.executable, "-c", _INDEX, str(out)], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
        if proc.returncode or not out.is_file():
            raise RuntimeError(f"indexing lm-eval {version}'s tasks failed: {proc.stderr.strip()[-500:]}")
        return json.loads(out.read_text())


def lm_eval_task_names() -> set[str] | None:
    """lm-eval's task names, from the cache when this lm-eval version was indexed before; ``None``
    (with a warning) when lm-eval is not installed or cannot be indexed."""
    version = _lm_eval_version()
    if version is None:
        log.warning("lm-eval is not installed: task names in the config are not checked")
        return None
    path = cache_dir() / f"lm_eval_tasks-{version}.json"
    try:
        return set(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass  # not cached yet (or unreadable): index once
    try:
        names = index_lm_eval_tasks(version)
    except Exception as e:  # noqa: BLE001  a broken lm-eval must not stop the workflow from parsing
        log.warning("task names in the config are not checked: %s", e)
        return None
    try:
        from ..io import write_json

        write_json(names, path)  # atomic: a concurrent snakemake never reads half a list
    except OSError as e:
        log.warning("could not cache lm-eval's task names in %s: %s", path, e)
    return set(names)


def close_matches(name: str, known, n: int = 5) -> list[str]:
    """Known names that ``name`` may have meant: those it extends (``mmlu`` for ``mmlu_typo``),
    longest first, then the most similar (difflib)."""
    prefixes = sorted((k for k in known if name.startswith(k) and k != name), key=len, reverse=True)[:2]
    similar = difflib.get_close_matches(name, sorted(known), n=n, cutoff=0.75)
    return list(dict.fromkeys(prefixes + similar))[:n]


def unknown_task(tasks: dict) -> str | None:
    """A message naming the first task of ``tasks`` that does not exist, with close matches, or
    ``None`` when all exist (or lm-eval's list is unavailable)."""
    named = named_tasks(tasks)
    if not named:
        return None
    if tasks.get("micro_data") is not None:
        known = micro_task_names(tasks["micro_data"])
        where = "{name} is not a micro task with data: no {name}.jsonl in " + str(tasks["micro_data"])
    else:
        from ..evaluation.local_mmlu import TASKS as LOCAL_TASKS  # built by the workflow (benchmarks.smk)
        from ..evaluation.local_suite import TASKS as SUITE_TASKS

        known = lm_eval_task_names()
        if known is None:
            return None
        known = set(known) | set(LOCAL_TASKS) | set(SUITE_TASKS)
        where = "{name} is not a task or group of lm-eval " + str(_lm_eval_version())
    for key, name in named:
        if name not in known:
            close = close_matches(name, known)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            return f"{key}: {where.format(name=name)}{hint}"
    return None
