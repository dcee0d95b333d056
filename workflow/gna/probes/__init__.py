"""Probes: the KV-retrieval probe set (paper Fig. 4) and multiple-choice scoring."""
from .kv import (SWEEP_N, english_words, generate_kv_probe, lm_eval_task_config, read_jsonl, sweep,
                 sweep_seed, write_jsonl)
from .scoring import (EncodedProbe, ProbeBatch, ProbeScore, batch_choice_logprobs, encode, examples_per_batch,
                      iter_batches, score)

__all__ = ["SWEEP_N", "EncodedProbe", "ProbeBatch", "ProbeScore", "batch_choice_logprobs", "encode",
           "english_words", "examples_per_batch", "generate_kv_probe", "iter_batches", "lm_eval_task_config",
           "read_jsonl", "score", "sweep", "sweep_seed", "write_jsonl"]
