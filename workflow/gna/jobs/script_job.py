"""Glue for the Snakemake scripts: logging into the rule's log file, threads, provenance."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from contextlib import contextmanager

from ..resume.keys import versions

PACKAGES = ("torch", "transformers", "lm_eval", "gna", "mamba_ssm", "causal_conv1d")


def package_versions() -> dict[str, str]:
    return versions(PACKAGES)


def provenance() -> dict[str, str]:
    """The columns every result row carries about how it was computed: ``v_<package>`` versions
    (the fused kernels' too: "absent" where not installed) and ``fused_kernels``, the ones gna's
    Llamba path ran in this process ("none" on the CPU). transformers' own Mamba-2 / Zamba2 use
    mamba-ssm on CUDA whenever it imports, so ``v_mamba_ssm`` and the device say that part."""
    out = {f"v_{k}": v for k, v in package_versions().items()}
    kernels = sys.modules.get("gna.models.llamba.kernels")
    out["fused_kernels"] = kernels.ran() if kernels is not None else "none"
    return out


def deterministic_torch() -> None:
    """Deterministic algorithms for a model job: torch's deterministic implementations where they
    exist (CUDA ``index_add_``, scatter, cumsum ...; warn_only: ops without one, e.g. SDPA's
    memory-efficient backward, warn in the log rather than fail) and cuBLAS's fixed workspace
    (read when CUDA starts, so set before). mamba-ssm's Triton kernels are outside torch's switch:
    their backward (atomic adds) stays nondeterministic (see docs/reproduction-notes.md)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)


def keep_freed_memory() -> None:
    """glibc hands a freed block of over 128 KB (and later the free top of its heap) back to the
    kernel, so the next training step's tensors of the same sizes fault their pages in again: a
    micro distillation step took 107,000 page faults, 4-6% of its time in the kernel alone and more
    with two jobs at once. Keep freed memory in the process instead (``mallopt``: large blocks from
    the heap up to 1 GiB, no trimming below 2 GiB); peak memory is unchanged, and so is every
    number. CPU model jobs only (a GPU job's host memory should go back); a no-op without glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    libc.mallopt(m_mmap_threshold, 1 << 30)
    libc.mallopt(m_trim_threshold, (1 << 31) - 1)


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
    deterministic_torch()
    if all(str(spec["device"]).startswith("cpu") for spec in specs):
        keep_freed_memory()
    from .devices import check_device
    from ..models.loading import name_config_keys

    for spec in specs:
        check_device(spec["device"])
    models = (getattr(snakemake, "config", None) or {}).get("models") or {}
    name_config_keys({m.get("path") or f"results/models/{n}": f"models.{n}" for n, m in models.items()})


@contextmanager
def job(snakemake):
    """Run a rule's body with stderr, logging and tqdm going to its log file, one torch
    thread per declared thread, and the exception written to the log before it propagates.
    A failure the user caused (:func:`_caused_by_user`: a bad value, device, model file or probe,
    a full disk) ends a script job with its one-line message on the terminal and exit status 1;
    the traceback stays in the log.

    A head scan or an evaluation inside the block resumes from the part a stopped run of the same
    job finished (:func:`resuming_job`).

    In a Snakemake script job the process ends when the block ends (``os._exit(0)`` once the
    log and streams are flushed): the interpreter's teardown of torch, transformers and lm-eval
    took about a second per job, a tenth of the micro study's summed job time, and does nothing
    a finished job needs (outputs are written atomically inside the block). So nothing may
    follow the ``with job(snakemake)`` block in a script."""
    log_path = snakemake.log[0] if snakemake.log else None
    stream = open(log_path, "w", buffering=1) if log_path else sys.stderr
    old_stderr = sys.stderr
    sys.stderr = stream
    logging.basicConfig(stream=stream, level=logging.INFO, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    _set_threads(max(1, int(getattr(snakemake, "threads", 1))))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.getLogger("gna").info("rule %s, params %s", snakemake.rule, dict(snakemake.params))
    user_error = None
    try:
        _start_model_job(snakemake)
        with resuming_job(snakemake):
            yield logging.getLogger(f"gna.{snakemake.rule}")
    except BaseException as e:
        logging.getLogger("gna").exception("rule %s failed", snakemake.rule)
        if not user_failure(snakemake, e):
            raise
        user_error = e
    finally:
        loading = sys.modules.get("gna.models.loading")  # imported by model jobs only (torch)
        if loading is not None:
            loading.name_config_keys({})  # this job's config keys must not name another's models
        sys.stderr = old_stderr
        if log_path:
            stream.close()
    if user_error is not None:
        exit_with_user_error(snakemake.rule, user_error, log_path)
    end_script_job(snakemake)


def resuming_job(snakemake, suffix: str = ""):
    """The job's head scans and evaluations keep what they finish in ``.partial/`` beside its first
    output (the first output's name plus ``suffix``: a batch's state apart from its first
    condition's), keyed by its inputs, settings and code (:mod:`gna.resume`), and resume from it
    after a stop; removed when the job succeeds. The key is computed only when a loop first asks."""
    from ..resume.keys import job_key, partial_dir
    from ..resume.store import resuming

    def part(name):
        return getattr(snakemake, name, None) or []

    def key() -> str:
        return job_key(snakemake.rule, part("input"), part("params"), part("wildcards"), part("output"))

    directory = partial_dir(part("output"))
    return resuming(directory if directory is None or not suffix else directory.with_name(directory.name + suffix), key)


def end_script_job(snakemake) -> None:
    """In a Snakemake script job, end the process once its streams are flushed (see :func:`job`);
    elsewhere (a test's stand-in object) return."""
    if _is_script_job(snakemake):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def user_failure(snakemake, e: BaseException) -> bool:
    """A script job failing on the user's input (:func:`_caused_by_user`): it ends with one line."""
    return _is_script_job(snakemake) and _caused_by_user(e)


def exit_with_user_error(rule: str, e: BaseException, log_path: str | None) -> None:
    """End the process with the one line a user needs on the terminal (exit status 1); the
    traceback is in the log for a developer."""
    where = f" (traceback in {log_path})" if log_path else ""
    print(f"Error in rule {rule}: {_one_line(e)}{where}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _caused_by_user(e: BaseException) -> bool:
    """The project's own errors (a bad value, device, model file, probe) and the machine's refusals
    to write (full disk, no permission): the message says what to fix; a traceback would bury it."""
    from ..errors import GnaError, user_os_error

    return isinstance(e, GnaError) or user_os_error(e)


def _one_line(e: BaseException) -> str:
    from ..errors import GnaError

    if isinstance(e, GnaError):
        return " ".join(str(e).split())
    return f"cannot write {e.filename or 'an output'}: {e.strerror}"  # an OSError (see _caused_by_user)


def per_model(inputs, counts: list[int]) -> list[list[str]]:
    """A table rule's flat input list cut into per-model lists: ``counts[i]`` files for model ``i``
    (the rules list their inputs model by model and pass the counts as a param)."""
    files, out, at = list(inputs), [], 0
    for n in counts:
        out.append(files[at: at + n])
        at += n
    if at != len(files):
        raise ValueError(f"{len(files)} inputs, but the per-model counts {list(counts)} add up to {at}")
    return out


def first_input(snakemake, name: str) -> str | None:
    """The first file of the named input ``name``, or None where the rule gave it none (an input
    function may return ``[]``, e.g. the web-token folder of a study on micro data)."""
    value = getattr(snakemake.input, name, None)
    if value is None or isinstance(value, str):
        return value
    return str(value[0]) if len(value) else None


def _set_threads(n: int) -> None:
    """``n`` torch threads; jobs without torch (probes, tables, figures) do not import it for
    this: the thread count is set in the environment torch reads when a later import loads it."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    else:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(n)


def _is_script_job(snakemake) -> bool:
    """Whether this process is a Snakemake ``script:`` job (not a test passing a stand-in object)."""
    cls = type(snakemake)  # snakemake.iocontainers.Snakemake in Snakemake 9 (snakemake.script before)
    return cls.__name__ == "Snakemake" and cls.__module__.split(".")[0] == "snakemake"
