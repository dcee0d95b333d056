"""The follow-up's KV-Ret metric, as goombalab/mohawk computes it: top-1 over the whole vocabulary.

mohawk's KV task (``dataloaders/DataGenerators/KVRetrieval.py``, ``configs/data/kv_retrieval.yaml``:
50 pairs) is one text, "...The value of the key 'K' is {answer}", tokenized with the tokenizer's
default special tokens (its ``raw`` collate: a BOS for Llama); ``evals/eval_ppl.py`` (``last_token``)
scores whether the argmax of the next-token logits at the position before the text's last token is
that token. Chance is ~0, unlike the G&A multiple choice over the dictionary's values (chance 1/n,
:mod:`gna.probes.scoring`): the two are different numbers and every row names which it is.

Here the text is a probe example's ``prompt`` + its answer choice (the separator is inside the
choice: ``kv_separator`` " " gives mohawk's "is 42"). Where the answer is several tokens, only the
last is scored, given the others, as mohawk does.
"""
from __future__ import annotations

import torch
from tqdm import tqdm


def answer_texts(examples: list[dict]) -> list[str]:
    """Each example's prompt with its answer appended: the whole text mohawk scores."""
    return [ex["prompt"] + ex["choices"][ex["answer"]] for ex in examples]


@torch.no_grad()
def kv_top1_hits(model, tokenizer, examples: list[dict], batch_size: int = 32) -> list[bool]:
    """Per example: is the model's top-1 next token at the answer position the text's last token?

    Batches are right-padded: every scored position precedes its row's padding, so a causal model
    (attention or SSM) reads no pad token and needs no attention mask."""
    ids = [tokenizer(t)["input_ids"] for t in answer_texts(examples)]
    short = [i for i, s in enumerate(ids) if len(s) < 2]
    if short:
        raise ValueError(f"KV example {examples[short[0]].get('id', short[0])!r} tokenizes to fewer than 2 tokens")
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    hits: list[bool] = []
    for start in tqdm(range(0, len(ids), batch_size), desc="KV top-1", leave=False):
        chunk = ids[start:start + batch_size]
        x = torch.full((len(chunk), max(map(len, chunk))), pad, dtype=torch.long, device=device)
        for row, seq in enumerate(chunk):
            x[row, :len(seq)] = torch.tensor(seq, device=device)
        rows = torch.arange(len(chunk), device=device)
        answer_pos = torch.tensor([len(s) - 2 for s in chunk], device=device)  # predicts the last token
        logits = model(input_ids=x, use_cache=False).logits[rows, answer_pos]   # (batch, vocab)
        hits += (logits.float().argmax(-1) == x[rows, answer_pos + 1]).tolist()
    return hits


def kv_top1(model, tokenizer, examples: list[dict], batch_size: int = 32) -> float:
    """mohawk's KV-Ret accuracy (0-1) on ``examples``."""
    hits = kv_top1_hits(model, tokenizer, examples, batch_size)
    return sum(hits) / max(len(hits), 1)
