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
        yield logging.getLogger(f"gna.{snakemake.rule}")
    except BaseException:
        logging.getLogger("gna").exception("rule %s failed", snakemake.rule)
        raise
    finally:
        sys.stderr = old_stderr
        if log_path:
            stream.close()
