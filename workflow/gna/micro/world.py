"""The seeded synthetic world of the micro study.

Two kinds of content, kept apart by construction so that a model can be perfect on one and
at chance on the other:

* **knowledge**: a fixed table of facts ``(relation, entity) -> value`` (``r3 e17 -> 42``).
  The training corpus shows these facts and nothing else about them; evaluation asks them
  *without* the answer in the prompt, so only what is stored in the weights can answer.
* **retrieval**: fresh random content generated per example (KV dictionaries ``kK V``,
  records ``fA 12 fB 7 ...``, passages of filler words ``wN``, lookup chains ``xA xB``).
  The answer is always in the prompt and is independent of the fact table, so a model that
  only memorised facts is at chance.

MMLU-format questions need both: the fact's value must be known (knowledge) and the letter
standing next to it must be copied from the context (retrieval).

Everything is drawn from ``random.Random`` streams seeded by *strings* built from
``WorldConfig.seed`` and a purpose (``"facts"``, ``"test/micro_kv"``, ...): string seeds are
hashed with SHA-512 by Python, independently of ``PYTHONHASHSEED``, so the same config gives
the same world and the same task files on every machine and Python >= 3.2.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, check_fields


@dataclass(frozen=True)
class WorldConfig:
    """The world and its evaluation tasks (one flat, zoology-style config).

    Vocabulary families: values ``"0".."{n_values-1}"``; KV keys ``k0..``; relations ``r0..``;
    entities ``e0..``; record fields ``f0..``; filler words ``w0..``; chain variables ``x0..``.
    """

    seed: int = 0
    # knowledge: n_relations x n_entities facts, each with a uniform random value
    n_relations: int = 5
    n_entities: int = 40
    n_values: int = 100
    # KV retrieval (the probe's compact format; the probe needs k0..k299, 0..99, "?")
    n_keys: int = 300
    kv_pairs: int = 8                 # pairs per prompt of the lm-eval task micro_kv
    # SWDE-like records
    n_fields: int = 16
    record_fields: tuple[int, int] = (4, 8)     # fields per record at evaluation (min, max)
    # LAMBADA-like passages
    n_words: int = 64
    passage_words: tuple[int, int] = (16, 32)   # words per passage at evaluation (min, max)
    # GSM8K/BBH-like lookup chains
    n_vars: int = 48
    chain_depth: int = 2              # lookups per chain: x3 -> x7 -> 42 is depth 2
    chain_count: int = 3              # chains per prompt (one is asked, the others distract)
    # multiple-choice shapes
    n_options: int = 4                # cloze, MMLU, ARC options (letters A, B, C, D, ...)
    statement_choices: int = 4        # choose-the-true-statement (HellaSwag/PIQA-like)
    fill_choices: int = 2             # fill-in with distractors (Winogrande-like)
    # evaluation sizes: rows per task (knowledge tasks: at most one row per fact)
    n_eval: int = 200

    def __post_init__(self):
        for name in ("n_relations", "n_entities", "n_keys", "n_fields", "n_words", "n_vars",
                     "kv_pairs", "chain_depth", "chain_count", "n_eval"):
            if getattr(self, name) < 1:
                raise ConfigError(f"WorldConfig.{name} = {getattr(self, name)} must be >= 1")
        if not 2 <= self.n_options <= 26:
            raise ConfigError(f"WorldConfig.n_options = {self.n_options} must be in 2..26")
        if self.n_values < max(self.n_options, self.kv_pairs, 2):
            raise ConfigError(f"WorldConfig.n_values = {self.n_values} must be >= n_options and kv_pairs")
        if self.kv_pairs > self.n_keys:
            raise ConfigError(f"WorldConfig.kv_pairs = {self.kv_pairs} exceeds n_keys = {self.n_keys}")
        if not 2 <= self.statement_choices <= self.n_entities:
            raise ConfigError(f"WorldConfig.statement_choices = {self.statement_choices} must be in 2..n_entities")
        if not 2 <= self.fill_choices <= self.n_entities:
            raise ConfigError(f"WorldConfig.fill_choices = {self.fill_choices} must be in 2..n_entities")
        lo, hi = self.record_fields
        if not 1 <= lo <= hi <= self.n_fields:
            raise ConfigError(f"WorldConfig.record_fields = {self.record_fields} must satisfy 1 <= min <= max <= n_fields")
        lo, hi = self.passage_words
        if not 4 <= lo <= hi:
            raise ConfigError(f"WorldConfig.passage_words = {self.passage_words} must satisfy 4 <= min <= max")
        if self.chain_count * self.chain_depth > self.n_vars:
            raise ConfigError(f"WorldConfig: chain_count x chain_depth = {self.chain_count * self.chain_depth} "
                              f"exceeds n_vars = {self.n_vars}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "WorldConfig":
        d = dict(d or {})
        check_fields(cls, d)
        for k in ("record_fields", "passage_words"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
QUERY = "?"          # the KV / record / chain query marker
ANSWER = "Answer:"   # the MMLU answer cue (one word for the word-level tokenizer)


@dataclass
class World:
    """The fixed facts and the word families of a :class:`WorldConfig`."""

    config: WorldConfig
    relations: list[str] = field(init=False)
    entities: list[str] = field(init=False)
    values: list[str] = field(init=False)
    keys: list[str] = field(init=False)
    fields: list[str] = field(init=False)
    words: list[str] = field(init=False)
    variables: list[str] = field(init=False)
    letters: list[str] = field(init=False)
    facts: dict[tuple[str, str], str] = field(init=False)

    def __post_init__(self):
        c = self.config
        self.relations = [f"r{i}" for i in range(c.n_relations)]
        self.entities = [f"e{i}" for i in range(c.n_entities)]
        self.values = [str(i) for i in range(c.n_values)]
        self.keys = [f"k{i}" for i in range(c.n_keys)]
        self.fields = [f"f{i}" for i in range(c.n_fields)]
        self.words = [f"w{i}" for i in range(c.n_words)]
        self.variables = [f"x{i}" for i in range(c.n_vars)]
        self.letters = list(LETTERS[: c.n_options])
        rng = self.rng("facts")
        self.facts = {(r, e): rng.choice(self.values) for r in self.relations for e in self.entities}

    def rng(self, *purpose: object) -> random.Random:
        """A random stream for ``purpose``, a pure function of the world seed and the purpose."""
        return random.Random("/".join(["gna-micro", str(self.config.seed), *map(str, purpose)]))

    @property
    def fact_list(self) -> list[tuple[str, str, str]]:
        """Facts as ``(relation, entity, value)``, in a fixed order."""
        return [(r, e, v) for (r, e), v in self.facts.items()]

    def vocabulary(self) -> list[str]:
        """Every word any task or training row can contain (specials and newline excluded)."""
        return [*self.values, *self.keys, QUERY, *self.relations, *self.entities,
                *self.letters, ANSWER, *self.fields, *self.words, *self.variables]

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(),
                "facts": [{"relation": r, "entity": e, "value": v} for r, e, v in self.fact_list]}


def build_world(config: WorldConfig | dict | None = None) -> World:
    if not isinstance(config, WorldConfig):
        config = WorldConfig.from_dict(config)
    return World(config)
