"""Training rows for the micro models: the recipe's segments, a curriculum, loss masks.

A row is a few *segments* in random order, each starting with BOS (see
``/work/shared/notes/micro-recipe.md`` for the measurements behind the recipe):

* ``kv`` (every row): a fresh dictionary of n lines ``kK V``, then every key queried once in
  random order, half the queries written ``kK ? V`` (the probe's form) and half ``kK V``;
  loss on the answers only. n is uniform in 1..nmax, nmax rising over the curriculum.
* ``facts`` (every row): a few of the fixed facts ``rX eY V``, loss on the value: the
  knowledge the model memorises.
* ``induction`` (every row): 6-12 random words, then the same words again, loss on the
  repeat from its second word on. Without it KV retrieval stays at chance for long.
* ``mmlu``: questions in the MMLU layout (``rX eY\\nA v\\nB v\\nC v\\nD v\\nAnswer: L``), loss
  on the letter only.
* ``record`` (SWDE-like): ``fA 12 fB 7 ...`` then queries ``fB ? 7``, loss on the value and
  the newline that ends it (so that generation stops).
* ``passage`` (LAMBADA-like): filler words whose last word repeats an earlier one; loss on it.
* ``chain`` (GSM8K/BBH-like): lookup lines ``x3 x7`` / ``x7 42`` shuffled, then each chain
  head queried, ``x3 ? x7 42``, loss on the chain of thought and its closing newline.

Curriculum: the difficulty rises linearly from 0 to 1 over ``curriculum_steps``: KV nmax from
``kv_start_pairs`` to ``kv_max_pairs``, record and passage lengths from their minimum to their
maximum. ``extras_start_step`` can hold the rows to the recipe's three segments for a first
phase (a knob, off by default).

Retrieval contexts are fresh random draws; any that coincides with an evaluation context
(:func:`gna.micro.tasks.evaluation_fingerprints`) is drawn again, so training and evaluation
retrieval prompts are disjoint. The facts are the same fixed facts the knowledge tasks ask.

Labels follow the Hugging Face convention: ``labels[i] = input_ids[i]`` where token ``i`` is
trained, ``-100`` elsewhere; the model shifts them.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any, Iterable

import torch

from ..errors import ConfigError, check_fields
from . import tasks as T
from .tokenizer import NEWLINE
from .world import ANSWER, QUERY, World, WorldConfig, build_world

IGNORE = -100
SEGMENTS = ("kv", "facts", "induction", "mmlu", "record", "passage", "chain")


@dataclass(frozen=True)
class CorpusConfig:
    """What a training row holds. Probabilities are per row; lengths in words."""

    max_len: int = 320                         # tokens per row at most (optional segments dropped to fit)
    curriculum_steps: int = 600                # difficulty rises linearly from 0 to 1 over these steps
    kv_max_pairs: int = 16                     # nmax at the end of the curriculum
    kv_start_pairs: int = 2                    # nmax at step 0
    kv_query_mark: float = 0.5                 # share of queries written "kK ? V"
    facts_per_row: int = 3
    induction_len: tuple[int, int] = (6, 12)
    mmlu_prob: float = 1.0
    mmlu_per_row: int = 4
    record_prob: float = 0.5
    record_fields: tuple[int, int] = (2, 8)    # fields per record: min, max (max reached by the curriculum)
    record_queries: int = 2
    passage_prob: float = 0.5
    passage_words: tuple[int, int] = (8, 32)   # words per passage: min, max (max reached by the curriculum)
    chain_prob: float = 0.5
    chain_count: tuple[int, int] = (1, 4)      # chains per segment: min, max
    extras_start_step: int = 0                 # before this step rows hold only kv, facts, induction

    def __post_init__(self):
        for name in ("mmlu_prob", "record_prob", "passage_prob", "chain_prob", "kv_query_mark"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"CorpusConfig.{name} = {getattr(self, name)} must be in [0, 1]")
        if not 1 <= self.kv_start_pairs <= self.kv_max_pairs:
            raise ConfigError(f"CorpusConfig: need 1 <= kv_start_pairs <= kv_max_pairs, got "
                              f"{self.kv_start_pairs}, {self.kv_max_pairs}")
        for name in ("induction_len", "record_fields", "passage_words", "chain_count"):
            lo, hi = getattr(self, name)
            if not 1 <= lo <= hi:
                raise ConfigError(f"CorpusConfig.{name} = {getattr(self, name)} must satisfy 1 <= min <= max")
        if self.passage_words[0] < 4:
            raise ConfigError(f"CorpusConfig.passage_words min must be >= 4, got {self.passage_words}")
        if self.max_len < 32:
            raise ConfigError(f"CorpusConfig.max_len = {self.max_len} must be >= 32")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "CorpusConfig":
        d = dict(d or {})
        check_fields(cls, d)
        for f in dataclasses.fields(cls):
            if f.name in d and isinstance(f.default, tuple):
                d[f.name] = tuple(d[f.name])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


Segment = list[tuple[str, bool]]   # (word, trained?)


class Corpus:
    """An endless, seeded stream of training rows.

    ``vocab`` maps words to token ids (``tokenizer.get_vocab()``); ``bos_id``/``pad_id`` are the
    tokenizer's. The stream is a pure function of ``(world config, corpus config, seed)`` and of
    the sequence of ``batch`` calls.
    """

    def __init__(self, world: World | WorldConfig | dict | None, config: CorpusConfig | dict | None,
                 vocab: dict[str, int], bos_id: int, pad_id: int, seed: int = 0,
                 exclude: set[tuple] | None = None):
        self.world = world if isinstance(world, World) else build_world(world)
        self.config = config if isinstance(config, CorpusConfig) else CorpusConfig.from_dict(config)
        self.vocab, self.bos_id, self.pad_id = vocab, bos_id, pad_id
        self.rng = random.Random(f"gna-micro/corpus/{self.world.config.seed}/{seed}")
        self.exclude = exclude if exclude is not None else T.evaluation_fingerprints(self.world)
        self.rejected = 0
        words = self.world.vocabulary()
        missing = [w for w in [*words, NEWLINE] if w not in vocab]
        if missing:
            raise ConfigError(f"the tokenizer lacks {len(missing)} corpus word(s), e.g. {missing[:5]}")
        self._induction_pool = words

    def set_config(self, config: CorpusConfig | dict) -> None:
        """Switch to another corpus config (a training phase); the random stream goes on."""
        self.config = config if isinstance(config, CorpusConfig) else CorpusConfig.from_dict(config)

    # ---------------------------------------------------------------- curriculum
    def difficulty(self, step: int) -> float:
        c = self.config.curriculum_steps
        return 1.0 if c <= 0 else min(1.0, max(0.0, step / c))

    def kv_nmax(self, step: int) -> int:
        c = self.config
        return round(c.kv_start_pairs + self.difficulty(step) * (c.kv_max_pairs - c.kv_start_pairs))

    def _ramp(self, lo_hi: tuple[int, int], step: int) -> int:
        lo, hi = lo_hi
        return round(lo + self.difficulty(step) * (hi - lo))

    # ---------------------------------------------------------------- segments
    def _fresh(self, kind: str, draw):
        while True:
            content = draw()
            if T.fingerprint(kind, content) not in self.exclude:
                return content
            self.rejected += 1

    @staticmethod
    def _line(seg: Segment, text: str, trained: bool = False) -> None:
        """Append ``text`` (words separated by spaces, lines by newlines), untrained by default."""
        for i, line in enumerate(text.split("\n")):
            if i:
                seg.append((NEWLINE, trained))
            seg.extend((w, trained) for w in line.split(" ") if w)

    def seg_kv(self, step: int) -> Segment:
        rng, w = self.rng, self.world
        n = rng.randint(1, self.kv_nmax(step))
        pairs = self._fresh("kv", lambda: T.sample_kv(w, rng, n))
        seg: Segment = []
        for line in T.kv_lines(pairs):
            self._line(seg, line)
            seg.append((NEWLINE, False))
        order = list(range(n))
        rng.shuffle(order)
        for j, i in enumerate(order):
            k, v = pairs[i]
            seg.append((k, False))
            if rng.random() < self.config.kv_query_mark:
                seg.append((QUERY, False))
            seg.append((v, True))
            if j < n - 1:
                seg.append((NEWLINE, False))
        return seg

    def seg_facts(self, step: int) -> Segment:
        seg: Segment = []
        facts = self.world.fact_list
        for j in range(self.config.facts_per_row):
            r, e, v = facts[self.rng.randrange(len(facts))]
            if j:
                seg.append((NEWLINE, False))
            seg += [(r, False), (e, False), (v, True)]
        return seg

    def seg_induction(self, step: int) -> Segment:
        n = self.rng.randint(*self.config.induction_len)
        toks = [self.rng.choice(self._induction_pool) for _ in range(n)]
        return [(t, False) for t in toks] + [(t, i > 0) for i, t in enumerate(toks)]

    def seg_mmlu(self, step: int) -> Segment:
        rng, w = self.rng, self.world
        facts = w.fact_list
        seg: Segment = []
        for j in range(self.config.mmlu_per_row):
            r, e, v = facts[rng.randrange(len(facts))]
            options, gold = self._fresh_mmlu(r, e, v)
            if j:
                seg.append((NEWLINE, False))
            self._line(seg, T.mmlu_prompt(r, e, options, w.letters))
            seg.append((w.letters[gold], True))
        return seg

    def _fresh_mmlu(self, r, e, v):
        while True:
            options, gold = T.sample_options(self.world, self.rng, v)
            if T.fingerprint("mmlu", [r, e, *options]) not in self.exclude:
                return options, gold
            self.rejected += 1

    def seg_record(self, step: int) -> Segment:
        rng, w = self.rng, self.world
        lo, hi = self.config.record_fields
        n = rng.randint(lo, self._ramp((lo, hi), step))
        record = self._fresh("record", lambda: T.sample_record(w, rng, n))
        seg: Segment = []
        self._line(seg, T.record_text(record))
        for _ in range(self.config.record_queries):
            f, v = rng.choice(record)
            seg += [(NEWLINE, False), (f, False), (QUERY, False), (v, True)]
        seg.append((NEWLINE, True))
        return seg

    def seg_passage(self, step: int) -> Segment:
        rng, w = self.rng, self.world
        lo, hi = self.config.passage_words
        n = rng.randint(lo, self._ramp((lo, hi), step))
        words = self._fresh("passage", lambda: T.sample_passage(w, rng, n))
        return [(x, False) for x in words[:-1]] + [(words[-1], True)]

    def seg_chain(self, step: int) -> Segment:
        rng, w = self.rng, self.world
        depth = rng.randint(1, w.config.chain_depth)
        count = rng.randint(*self.config.chain_count)
        count = min(count, len(w.variables) // depth)

        def draw():
            chains = T.sample_chains(w, rng, count, depth)
            lines = T.chain_lines(chains)
            rng.shuffle(lines)
            return chains, lines

        while True:
            chains, lines = draw()
            if T.fingerprint("chain", lines) not in self.exclude:
                break
            self.rejected += 1
        seg: Segment = []
        for i, (a, b) in enumerate(lines):
            if i:
                seg.append((NEWLINE, False))
            seg += [(a, False), (b, False)]
        order = list(range(count))
        rng.shuffle(order)
        for i in order:
            chain = chains[i]
            seg += [(NEWLINE, False), (chain[0], False), (QUERY, False)]
            seg += [(x, True) for x in chain[1:]]
        seg.append((NEWLINE, True))
        return seg

    # ---------------------------------------------------------------- rows and batches
    def row(self, step: int) -> tuple[list[int], list[int]]:
        """One training row: ``(input_ids, labels)``, at most ``max_len`` tokens."""
        c, rng = self.config, self.rng
        mandatory = [self.seg_kv(step), self.seg_facts(step), self.seg_induction(step)]
        optional = []
        extras = () if step < c.extras_start_step else (
            ("mmlu", c.mmlu_prob), ("record", c.record_prob), ("passage", c.passage_prob),
            ("chain", c.chain_prob))
        for name, p in extras:
            if p > 0 and rng.random() < p:
                optional.append(getattr(self, f"seg_{name}")(step))
        segs = mandatory + optional
        total = sum(len(s) + 1 for s in segs)
        while total > c.max_len and optional:
            drop = optional.pop(rng.randrange(len(optional)))
            segs.remove(drop)
            total -= len(drop) + 1
        rng.shuffle(segs)
        ids: list[int] = []
        labels: list[int] = []
        v = self.vocab
        for seg in segs:
            ids.append(self.bos_id)
            labels.append(IGNORE)
            for word, trained in seg:
                tid = v[word]
                ids.append(tid)
                labels.append(tid if trained else IGNORE)
        return ids[: c.max_len], labels[: c.max_len]

    def batch(self, step: int, batch_size: int, pad_multiple: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` rows right-padded to the longest (rounded up to ``pad_multiple``);
        pads have label ``-100``. Right padding needs no attention mask in a causal model."""
        rows = [self.row(step) for _ in range(batch_size)]
        width = max(len(ids) for ids, _ in rows)
        width = min(self.config.max_len, -(-width // pad_multiple) * pad_multiple) if pad_multiple > 1 else width
        width = max(width, max(len(ids) for ids, _ in rows))
        inp = torch.full((batch_size, width), self.pad_id, dtype=torch.long)
        lab = torch.full((batch_size, width), IGNORE, dtype=torch.long)
        for i, (ids, labels) in enumerate(rows):
            inp[i, : len(ids)] = torch.tensor(ids)
            lab[i, : len(labels)] = torch.tensor(labels)
        return inp, lab


def render(tokenizer, ids: Iterable[int], labels: Iterable[int] | None = None) -> str:
    """Human-readable row: trained tokens in ``[brackets]`` (for inspection and tests)."""
    toks = tokenizer.convert_ids_to_tokens(list(ids))
    if labels is None:
        return " ".join(toks)
    return " ".join(f"[{t}]" if l != IGNORE else t for t, l in zip(toks, labels))
