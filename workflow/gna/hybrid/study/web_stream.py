"""The paper-scale distillation data: fineweb-edu and finemath streamed from the Hub, tokenized
with the teacher's tokenizer (BOS + text + EOS) and packed into ``seq_len`` rows.

The stream is read once, by rule ``distill_tokens``, into shard files
(:mod:`gna.hybrid.study.token_shards`) that the distillation jobs read offline. This module needs
no torch until rows are made, so the workflow can name the token folders when it is parsed.

Held-out documents: a fixed 1 in ``HELDOUT_EVERY`` of every source's documents (by a hash of the
text) is held out. Training rows never contain them and the held-out perplexity reads only
them, so the two are disjoint whatever the shuffle (a different shuffle seed alone would not do
it: both would start from the same first buffer of documents).
"""
from __future__ import annotations

import hashlib
import json
from typing import Iterator

from ...errors import ConfigError

# The follow-up distils on fineweb-edu and finemath; the subsets and mixture weights are our
# assumption (the paper gives the sources, not the proportions).
WEB_SOURCES = (
    {"path": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT", "weight": 0.7, "text": "text"},
    {"path": "HuggingFaceTB/finemath", "name": "finemath-3plus", "weight": 0.3, "text": "text"},
)
MIXINGS = ("sample", "round_robin")
"""How the web sources are mixed, document by document: ``sample`` draws each document's source at
random with probability proportional to its weight (``datasets.interleave_datasets``, until every
source is exhausted); ``round_robin`` takes ``weight`` documents from each source in turn (weights
are whole numbers), as goombalab/mohawk's ``dataloaders/DataWrappers/RoundRobinLoader.py``
(``ratio``, default 1 each), stopping when a source runs out."""
SPLITS = ("train", "heldout")
HELDOUT_EVERY = 1000
TOKENIZE_DOCS = 64  # documents tokenized per call: the fast tokenizer batches (and parallelises) them


def web_sources(data: dict) -> list[dict]:
    """The sources of a ``{source: web, sources?}`` data config (default :data:`WEB_SOURCES`)."""
    return [dict(s) for s in (data.get("sources") or WEB_SOURCES)]


def is_heldout(text: str) -> bool:
    """Whether a document belongs to the held-out split (a stable hash of its text)."""
    return int.from_bytes(hashlib.sha1(text.encode("utf-8", "replace")).digest()[:8], "big") % HELDOUT_EVERY == 0


def web_mix(data: dict) -> dict:
    """The settings of a web data config that decide its rows (not batch sizes or per-stage keys)."""
    return {"source": "web", "sources": web_sources(data), "seq_len": int(data.get("seq_len", 2048)),
            "mixing": data.get("mixing", "sample")}


def token_set_name(data: dict, split: str, seed: int) -> str:
    """The folder name of the prepared tokens of ``data`` (``<split>-<digest>``): every setting that
    changes the rows (:func:`web_mix`, the seed, the split), nothing that does not (batch sizes)."""
    if split not in SPLITS:
        raise ConfigError(f"token split {split!r} is not one of {SPLITS}")
    mix = web_mix(data)
    key = {"sources": mix["sources"], "seq_len": mix["seq_len"], "mixing": mix["mixing"], "seed": int(seed),
           "split": split}
    return f"{split}-{hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]}"


def _round_robin(streams, ratios: list[int]) -> Iterator[str]:
    """Texts of ``streams`` in turn, ``ratios[i]`` consecutive documents of stream i per round."""
    iters = [iter(s) for s in streams]
    order = [i for i, r in enumerate(ratios) for _ in range(r)]
    while True:
        for i in order:
            doc = next(iters[i], None)
            if doc is None:
                return
            yield doc["text"]


class WebStream:
    """Batches ``{"input_ids": (batch_size, seq_len)}`` of packed rows from interleaved streaming
    datasets (re-iterable; the same order every time: the shuffle buffer and interleaving are
    seeded). ``split``: ``train`` (every document but the held-out ones) or ``heldout``."""

    def __init__(self, tokenizer, sources=WEB_SOURCES, seq_len: int = 2048, batch_size: int = 32, seed: int = 0,
                 shuffle_buffer: int = 10_000, mixing: str = "sample", split: str = "train"):
        self.tokenizer, self.sources = tokenizer, [dict(s) for s in sources]
        self.seq_len, self.batch_size, self.seed, self.shuffle_buffer = seq_len, batch_size, seed, shuffle_buffer
        self.mixing, self.split = mixing, split
        if not self.sources:
            raise ConfigError("the web data stream needs at least one source")
        if mixing not in MIXINGS:
            raise ConfigError(f"data mixing {mixing!r} is not one of {', '.join(MIXINGS)}")
        if split not in SPLITS:
            raise ConfigError(f"data split {split!r} is not one of {', '.join(SPLITS)}")
        if mixing == "round_robin":
            ratios = [s.get("weight", 1) for s in self.sources]
            if any(float(r) != int(r) or int(r) < 1 for r in ratios):
                raise ConfigError(f"round_robin mixing takes whole-number source weights (documents per round), "
                                  f"got {ratios}")

    def _load(self, source: dict):
        from datasets import load_dataset

        kwargs = {"data_files": source["data_files"]} if source.get("data_files") else {}
        return load_dataset(source["path"], source.get("name"), split=source.get("split", "train"), streaming=True,
                            **kwargs)

    def _mixed(self) -> Iterator[str]:
        from datasets import interleave_datasets

        streams = []
        for s in self.sources:
            ds = self._load(s)
            col = s.get("text", "text")
            ds = ds.select_columns([col]).rename_column(col, "text") if col != "text" else ds.select_columns(["text"])
            streams.append(ds.shuffle(seed=self.seed, buffer_size=self.shuffle_buffer))
        if self.mixing == "round_robin":
            yield from _round_robin(streams, [int(s.get("weight", 1)) for s in self.sources])
            return
        weights = [float(s.get("weight", 1.0)) for s in self.sources]
        total = sum(weights)
        mixed = interleave_datasets(streams, probabilities=[w / total for w in weights], seed=self.seed,
                                    stopping_strategy="all_exhausted")
        for doc in mixed:
            yield doc["text"]

    def _documents(self) -> Iterator[str]:
        heldout = self.split == "heldout"
        return (text for text in self._mixed() if is_heldout(text) == heldout)

    def _token_lists(self) -> Iterator[list[int]]:
        tok = self.tokenizer
        bos, eos = tok.bos_token_id, tok.eos_token_id
        docs = self._documents()
        while True:
            group = [t for _, t in zip(range(TOKENIZE_DOCS), docs)]
            if not group:
                return
            for ids in tok(group, add_special_tokens=False)["input_ids"]:
                yield ([bos] if bos is not None else []) + list(ids) + ([eos] if eos is not None else [])

    def __iter__(self) -> Iterator[dict]:
        import torch

        buf: list[int] = []
        rows: list[list[int]] = []
        for ids in self._token_lists():
            buf += ids
            while len(buf) >= self.seq_len:
                rows.append(buf[: self.seq_len])
                buf = buf[self.seq_len:]
                if len(rows) == self.batch_size:
                    yield {"input_ids": torch.tensor(rows)}
                    rows = []
