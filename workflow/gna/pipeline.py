"""Glue for the Snakemake scripts: logging into the rule's log file, threads, provenance."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from contextlib import contextmanager
from importlib import metadata

PACKAGES = ("torch", "transformers", "lm_eval", "gna")


def package_versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p.replace("_", "-"))
        except metadata.PackageNotFoundError:
            out[p] = "absent"
    return out


def config_hash(obj) -> str:
    """Short stable hash of the parameters a result depends on."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _model_specs(params) -> list[dict]:
    """The ModelSpec dicts among a rule's params: ``spec``, ``teacher``/``student``, or a
    ``specs`` mapping of them (``{"path": ..., "device": ...}``; see ``model_spec`` in common.smk)."""
    found = []
    for value in dict(params).values():
        for v in (value.values() if isinstance(value, dict) and "path" not in value else [value]):
            if isinstance(v, dict) and "path" in v and "device" in v:
                found.append(v)
    return found


def _start_model_job(snakemake) -> None:
    """Before a model job does anything: refuse a device this machine lacks (naming the config key
    ``device``) and let load errors name each model's config key (``models.<name>``).

    Checked here, when the job starts on its node, and not when the workflow is parsed: a
    cluster's login node may have no GPU while the jobs it submits do."""
    specs = _model_specs(snakemake.params)
    if not specs:  # tables, figures, probes: no model, so no device to check
        return
    from .devices import check_device
    from .models.loading import name_config_keys

    for spec in specs:
        check_device(spec["device"])
    models = (getattr(snakemake, "config", None) or {}).get("models") or {}
    name_config_keys({m.get("path") or f"results/models/{n}": f"models.{n}" for n, m in models.items()})


@contextmanager
def job(snakemake):
    """Run a rule's body with stderr, logging and tqdm going to its log file, one torch
    thread per declared thread, and the exception written to the log before it propagates."""
    import torch

    log_path = snakemake.log[0] if snakemake.log else None
    stream = open(log_path, "w", buffering=1) if log_path else sys.stderr
    old_stderr = sys.stderr
    sys.stderr = stream
    logging.basicConfig(stream=stream, level=logging.INFO, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    torch.set_num_threads(max(1, int(getattr(snakemake, "threads", 1))))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.getLogger("gna").info("rule %s, params %s", snakemake.rule, dict(snakemake.params))
    try:
        _start_model_job(snakemake)
        yield logging.getLogger(f"gna.{snakemake.rule}")
    except BaseException:
        logging.getLogger("gna").exception("rule %s failed", snakemake.rule)
        raise
    finally:
        loading = sys.modules.get("gna.models.loading")  # imported by model jobs only (torch)
        if loading is not None:
            loading.name_config_keys({})  # this job's config keys must not name another's models
        sys.stderr = old_stderr
        if log_path:
            stream.close()
