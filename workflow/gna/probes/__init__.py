"""Probes: the KV-retrieval probe set (paper Fig. 4) and multiple-choice scoring.

``probes.kv`` (writing probe sets) needs no torch; ``probes.scoring`` does. The names below are
resolved on first use so that a job that only writes probe files (rule kv_probe, 16 jobs in the
micro study) does not pay torch's import (about a second each).
"""
from importlib import import_module

_FROM = {
    "kv": ("SWEEP_N", "english_words", "generate_kv_probe", "lm_eval_task_config", "parse_probe_task", "probe_suite",
           "probe_task_name", "read_jsonl", "sweep", "sweep_seed", "write_jsonl"),
    "encoded": ("EncodedProbe",),
    "scoring": ("ProbeBatch", "ProbeScore", "batch_choice_logprobs", "encode",
                "examples_per_batch", "iter_batches", "score"),
}
_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_MODULE_OF[name]}", __name__), name)


def __dir__():
    return __all__
