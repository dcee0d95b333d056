"""The micro models' recipes: per-family sizes, the phased training schedule, its config classes.

:data:`FAMILY_PRESETS` is the one place for each family's model size (keyword arguments of its
transformers config class) and training recipe (:class:`TrainConfig` fields, with
:class:`PhaseConfig` phases); the pipeline config references and overrides them, and
:func:`resolve_train_config` merges the layers (TrainConfig defaults < preset < the caller's).
gna/micro/RECIPE.md has the measurements behind the numbers.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, check_fields
from .corpus import CorpusConfig
from .world import WorldConfig

FAMILIES = ("llama", "mamba2", "mamba1", "zamba2", "bamba")

# The one place for the per-family model size and recipe. "model": keyword arguments of the
# transformers config class (vocabulary size and special ids are added by
# `family_models.model_config`);
# "train": TrainConfig fields (nested "world"/"corpus" dicts are merged key by key).
#
# The recipe (gna/micro/RECIPE.md has the measurements): three phases, each ending at a fixed
# evaluation step once its targets are met (or after its steps), so the stopping step is
# reproducible.
#   1. "retrieval": the recipe notes' short rows (KV dictionary, three facts, an induction
#      segment), KV curriculum from 1-2 to 16 pairs over 600 steps, until the retrieval targets.
#   2. "mix": every segment (MMLU-format x6 per row, records, passages, chains), until MMLU .6.
#   3. "mmlu12": warm restart (fresh AdamW, 50-step warm-up, cosine over the phase) with 12
#      MMLU-format questions per row, until the final targets.
_EXTRAS_OFF = {"mmlu_prob": 0.0, "record_prob": 0.0, "passage_prob": 0.0, "chain_prob": 0.0}


def _recipe(retrieval_steps: int, retrieval_targets: dict, mix_steps: int, final_steps: int) -> dict[str, Any]:
    return {
        "max_steps": 4000, "eval_every": 50,
        "targets": {"kv8": 0.95, "knowledge": 0.98, "mmlu": 0.9},
        "corpus": {"mmlu_per_row": 6},
        "phases": [
            {"name": "retrieval", "steps": retrieval_steps, "targets": retrieval_targets,
             "corpus": dict(_EXTRAS_OFF)},
            {"name": "mix", "steps": mix_steps, "targets": {"mmlu": 0.6}},
            {"name": "mmlu12", "steps": final_steps, "restart": True, "warmup_steps": 50,
             "decay_steps": final_steps, "corpus": {"mmlu_per_row": 12}},
        ],
    }


FAMILY_PRESETS: dict[str, dict[str, Any]] = {
    "llama": {  # the recipe's transformer (micro-recipe.md: kv8 >= .9 in ~350 steps)
        "model": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      intermediate_size=256, hidden_act="silu", max_position_embeddings=512,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                      tie_word_embeddings=False),
        "train": _recipe(1000, {"kv8": 0.95, "kv16": 0.9, "knowledge": 0.98}, 1000, 600),
    },
    # chunk_size (Mamba-2 and Zamba2): the SSD result does not depend on it (up to rounding); the
    # pure-PyTorch path pads every sequence to a multiple of it and its cost grows with it. Measured
    # on 64 x 288-token rows, one thread, forward+backward: Mamba-2 2.2 s at 32-64, 4.1 s at 128,
    # 6-6.7 s at 320; Zamba2 2.5-2.7 s at 32-64, 11-12 s at 320. Hence 64 (not the 256 default).
    "mamba2": {  # state 64 is what made a 2-layer Mamba-2 retrieve in the recipe notes
        "model": dict(hidden_size=64, num_hidden_layers=2, num_heads=8, head_dim=16, state_size=64,
                      expand=2, n_groups=1, conv_kernel=4, chunk_size=64, tie_word_embeddings=False),
        "train": _recipe(600, {"kv8": 0.9, "knowledge": 0.98}, 600, 400),
    },
    "mamba1": {  # state 16 as in Falcon-Mamba-7B; pure-PyTorch path through mambapy's parallel scan
        "model": dict(hidden_size=64, num_hidden_layers=2, state_size=16, expand=2, conv_kernel=4,
                      use_mambapy=True, tie_word_embeddings=False),
        "train": _recipe(400, {"kv8": 0.9, "knowledge": 0.98}, 100, 50),
    },
    "zamba2": {  # Mamba-2 (state 16) layers; one shared attention+MLP block invoked twice.
        # tie_word_embeddings must stay True: in transformers 5.x Zamba2 ties the shared block's
        # weights across hybrid layers only when it ties the embeddings (with False every hybrid
        # layer silently gets its own attention block). adapter_rank: the per-invocation MLP
        # LoRA adapters (default 128 would exceed the hidden size here).
        "model": dict(hidden_size=64, num_hidden_layers=4,
                      layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
                      mamba_d_state=16, mamba_expand=2, n_mamba_heads=8, mamba_ngroups=1,
                      num_attention_heads=4, num_key_value_heads=4, intermediate_size=256,
                      num_mem_blocks=1, use_shared_attention_adapter=False, adapter_rank=8,
                      use_mem_rope=True, max_position_embeddings=512, chunk_size=64,
                      tie_word_embeddings=True),
        "train": _recipe(600, {"kv8": 0.9, "knowledge": 0.98}, 600, 400),   # Mamba-2's budgets: MMLU-format
    },
    "bamba": {  # the recipe notes' hybrid: Mamba-2 (state 16), attention, Mamba-2, Mamba-2 (kv8 >= .9 in ~450
        # steps, where a state-16 Mamba-2 stack alone stays at chance: the attention layer carries retrieval)
        "model": dict(hidden_size=64, num_hidden_layers=4, attn_layer_indices=[1], num_attention_heads=4,
                      num_key_value_heads=4, intermediate_size=256, mamba_n_heads=8, mamba_d_head=16,
                      mamba_n_groups=1, mamba_d_state=16, mamba_expand=2, mamba_d_conv=4, mamba_chunk_size=64,
                      max_position_embeddings=512, tie_word_embeddings=False),
        # Mamba-2's phase budgets; only the retrieval phase has been run on this family (val-bamba)
        "train": _recipe(600, {"kv8": 0.9, "knowledge": 0.98}, 600, 400),
    },
}


@dataclass(frozen=True)
class PhaseConfig:
    """One phase of a multi-phase schedule (``TrainConfig.phases``).

    ``corpus`` overrides ``TrainConfig.corpus`` key by key for the phase's rows (the corpus
    random stream and the curriculum, which follows the global step, go on across phases).
    ``restart``: a fresh AdamW and a new warm-up + cosine schedule from the phase's first step,
    with ``lr``/``warmup_steps``/``decay_steps``/``min_lr_ratio`` (each defaulting to the
    TrainConfig value); without it the optimiser and the schedule simply continue.
    ``targets``: the phase ends at the first evaluation (every ``eval_every`` global steps,
    so at a reproducible step) at which all are met; empty: it runs its ``steps``.
    """

    steps: int
    name: str = ""
    corpus: dict[str, Any] = field(default_factory=dict)
    restart: bool = False
    lr: float | None = None
    warmup_steps: int | None = None
    decay_steps: int | None = None
    min_lr_ratio: float | None = None
    targets: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PhaseConfig":
        d = dict(d or {})
        check_fields(cls, d)
        if "steps" not in d:
            raise ConfigError("every training phase needs 'steps'")
        ph = cls(**d)
        if ph.steps < 1:
            raise ConfigError(f"phase {ph.name!r}: steps = {ph.steps} must be >= 1")
        sched = [k for k in ("lr", "warmup_steps", "decay_steps", "min_lr_ratio") if getattr(ph, k) is not None]
        if sched and not ph.restart:
            raise ConfigError(f"phase {ph.name!r} sets {sched} without restart: true (the schedule only "
                              "changes at a restart)")
        return ph

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TrainConfig:
    """The optimisation recipe (micro-recipe.md) and the evaluation schedule.

    Without ``phases`` the run is one phase of ``max_steps`` on ``corpus``. With ``phases``
    (a list of :class:`PhaseConfig` dicts) the phases run in order, and ``max_steps`` caps
    the total. ``targets`` stops the whole run early, checked at the evaluations of the last
    phase only (earlier phases end by their own ``targets`` or steps).
    """

    max_steps: int = 3000
    batch_size: int = 64
    lr: float = 3e-3
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.0
    warmup_steps: int = 50
    decay_steps: int = 2000            # cosine from lr to min_lr_ratio*lr over these steps (then flat)
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 50
    eval_at_start: bool = False
    eval_rows: int = 128               # rows per evaluation set (knowledge: every fact)
    kv_eval_pairs: tuple[int, ...] = (4, 8, 16)
    targets: dict[str, float] = field(default_factory=lambda: {"kv8": 0.9, "knowledge": 0.95, "mmlu": 0.8})
    max_seconds: float | None = None   # wall-clock budget; makes the stopping step non-reproducible
    threads: int = 1
    progress: bool = True
    fast_scan: bool = True             # mamba1: train with gna.micro.mamba_scan (exact, faster; same model class)
    world: dict[str, Any] = field(default_factory=dict)    # WorldConfig fields
    corpus: dict[str, Any] = field(default_factory=dict)   # CorpusConfig fields
    phases: list[dict[str, Any]] = field(default_factory=list)   # PhaseConfig fields, in order

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "TrainConfig":
        d = dict(d or {})
        check_fields(cls, d)
        for k in ("betas", "kv_eval_pairs"):
            if k in d:
                d[k] = tuple(d[k])
        if "phases" in d:
            d["phases"] = [PhaseConfig.from_dict(p).to_dict() for p in (d["phases"] or [])]
        cfg = cls(**d)
        if cfg.max_steps < 1 or cfg.batch_size < 1 or cfg.eval_every < 1:
            raise ConfigError("TrainConfig: max_steps, batch_size and eval_every must be >= 1")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else copy.deepcopy(v)
                for k, v in dataclasses.asdict(self).items()}

    def phase_list(self) -> list[PhaseConfig]:
        """The phases to run (one implicit phase of ``max_steps`` when none are given)."""
        if not self.phases:
            return [PhaseConfig(steps=self.max_steps, name="main")]
        return [PhaseConfig.from_dict(p) for p in self.phases]

    def total_steps(self) -> int:
        return min(self.max_steps, sum(p.steps for p in self.phase_list()))


def family_preset(family: str) -> dict[str, Any]:
    """The recipe of ``family`` (:data:`FAMILY_PRESETS`; not a copy), or an error naming the known ones."""
    if family not in FAMILY_PRESETS:
        raise ConfigError(f"unknown micro family {family!r}; known: {', '.join(FAMILIES)}")
    return FAMILY_PRESETS[family]


def resolve_train_config(family: str, train_config: TrainConfig | dict | None) -> TrainConfig:
    """TrainConfig defaults < the family preset < ``train_config`` (world/corpus merged by key)."""
    preset = family_preset(family)
    given = train_config.to_dict() if isinstance(train_config, TrainConfig) else dict(train_config or {})
    merged = copy.deepcopy(preset["train"])
    for k, v in given.items():
        if k in ("world", "corpus", "targets") and isinstance(v, dict) and k in merged:
            merged[k] = {**merged[k], **v}
        else:
            merged[k] = v
    cfg = TrainConfig.from_dict(merged)
    WorldConfig.from_dict(cfg.world)      # validate early
    CorpusConfig.from_dict(cfg.corpus)
    for ph in cfg.phase_list():
        CorpusConfig.from_dict({**cfg.corpus, **ph.corpus})
    return cfg

