"""The trainer's validation sets and their scoring: KV retrieval, knowledge, MMLU-format, generation.

:func:`build_eval_sets` draws them from the task generators' ``val`` split (disjoint from the
JSONL test files and, for retrieval, from the training corpus); :func:`evaluate` scores a model
on them by greedy argmax at fixed positions, so the numbers the trainer logs and stops on are a
pure function of the model and the configs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import tasks as T
from .recipes import TrainConfig


@dataclass
class EvalSet:
    """Items ``(ids, checks)``; a check ``(position, candidate ids or None, gold id)`` passes when
    the argmax of the logits at ``position`` over the candidates (all tokens if None) is gold.
    An item is correct when all its checks pass (greedy exact match for generation targets)."""

    name: str
    items: list[tuple[list[int], list[tuple[int, list[int] | None, int]]]]


def _ids(tok, text: str) -> list[int]:
    return tok(text).input_ids


def build_eval_sets(world, tok, cfg: TrainConfig) -> list[EvalSet]:
    """The trainer's validation sets, from the task generators' ``val`` split (disjoint from
    the JSONL test files and, for retrieval, from the training corpus)."""
    n = cfg.eval_rows
    sets = []
    for pairs in cfg.kv_eval_pairs:
        items = []
        for row in T.kv_rows(world, pairs, n, "val"):
            ids = _ids(tok, row["prompt"])
            cands = [tok.convert_tokens_to_ids(c.strip()) for c in row["choices"]]
            items.append((ids, [(len(ids) - 1, cands, cands[row["answer"]])]))
        sets.append(EvalSet(f"kv{pairs}", items))
    values = [tok.convert_tokens_to_ids(v) for v in world.values]
    items = []
    for r, e, v in world.fact_list:
        ids = _ids(tok, T.fact_prompt(r, e))
        items.append((ids, [(len(ids) - 1, values, tok.convert_tokens_to_ids(v))]))
    sets.append(EvalSet("knowledge", items))
    val = T.generate_tasks(world, "val", ["micro_mmlu", "micro_swde", "micro_lambada", "micro_chain"])
    letters = [tok.convert_tokens_to_ids(l) for l in world.letters]
    items = []
    for row in val["micro_mmlu"][:n]:
        ids = _ids(tok, row["prompt"])
        items.append((ids, [(len(ids) - 1, letters, letters[row["answer"]])]))
    sets.append(EvalSet("mmlu", items))
    for name, task in (("swde", "micro_swde"), ("lambada", "micro_lambada"), ("chain", "micro_chain")):
        items = []
        for row in val[task][:n]:
            p = _ids(tok, row["prompt"])
            t = tok(row["target"], add_special_tokens=False).input_ids
            ids = p + t
            items.append((ids[:-1], [(len(p) - 1 + j, None, t[j]) for j in range(len(t))]))
        sets.append(EvalSet(name, items))
    return sets


@torch.no_grad()
def evaluate(model, eval_sets: list[EvalSet], pad_id: int = 0, batch_size: int = 64) -> dict[str, float]:
    """Accuracy per eval set (right padding; causal models need no mask for it)."""
    was_training = model.training
    model.eval()
    out = {}
    for es in eval_sets:
        order = sorted(range(len(es.items)), key=lambda i: len(es.items[i][0]))
        correct = 0
        for s in range(0, len(order), batch_size):
            chunk = [es.items[i] for i in order[s:s + batch_size]]
            width = max(len(ids) for ids, _ in chunk)
            inp = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            for b, (ids, _) in enumerate(chunk):
                inp[b, :len(ids)] = torch.tensor(ids)
            logits = model(input_ids=inp, use_cache=False).logits
            for b, (_, checks) in enumerate(chunk):
                ok = True
                for pos, cands, gold in checks:
                    row = logits[b, pos]
                    pred = cands[int(row[cands].argmax())] if cands is not None else int(row.argmax())
                    ok = ok and pred == gold
                correct += ok
        out[es.name] = correct / max(1, len(es.items))
    model.train(was_training)
    return out

