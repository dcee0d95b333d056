"""Training of the micro models: transformers' own classes, seeded, one CPU thread.

``train(family, model_config_overrides, train_config, out_dir, seed)`` builds a model of
``family`` (``llama`` -> ``LlamaForCausalLM``, ``mamba2`` -> ``Mamba2ForCausalLM``, ``mamba1``
-> ``MambaForCausalLM``, ``zamba2`` -> ``Zamba2ForCausalLM``), trains it on
:class:`gna.micro.corpus.Corpus` rows with AdamW, linear warm-up then cosine decay and gradient
clipping, in one or more *phases* (:class:`PhaseConfig`: each with its own corpus settings,
optionally a fresh optimiser and warm-up, and targets that end it), evaluates every
``eval_every`` steps (loss, KV accuracy at 4/8/16 pairs, knowledge, MMLU-format, and greedy
exact match on the SWDE/LAMBADA/chain analogues), stops early once every ``targets`` threshold
is met in the last phase, and saves a directory that loads like a Hugging Face model:
``AutoModelForCausalLM.from_pretrained(out_dir)`` and ``AutoTokenizer.from_pretrained(out_dir)``,
plus ``train_config.json`` (everything needed to rerun), ``train_log.csv`` (one row per
evaluation) and ``train_summary.json`` (final metrics, phases, wall time). The directory appears
atomically: it is written as ``<out_dir>.tmp-<pid>`` and renamed.

Mamba-1 trains with :mod:`gna.micro.mamba_scan` (an exact selective scan with a hand-written
backward, several times faster than transformers' pure-PyTorch paths) swapped in for the
duration of training only; the model class and the checkpoint are plain Mamba.

Reproducibility: the model init (``torch.manual_seed(seed)``), the corpus stream (string-seeded
``random.Random``) and the evaluation sets are pure functions of the configs and the seed;
targets are checked at fixed evaluation steps; training runs on one thread with deterministic
algorithms. With the same software versions (torch, transformers) on the same kind of CPU, two
runs produce byte-identical ``model.safetensors`` (the test suite checks this for a short run;
RECIPE.md reports it for the shipped models). Across CPU types or library versions
floating-point kernels may differ in the last bits, so bytes are not guaranteed there. A
``max_seconds`` budget stops at a wall-clock-dependent step and so is *not* reproducible; the
step it stopped at is in ``train_summary.json``, and rerunning with ``max_steps`` set to it
reproduces the model.

The per-family model sizes and recipes live in :data:`FAMILY_PRESETS` (the one place; the
pipeline config references and overrides them).
"""
from __future__ import annotations

import copy
import csv
import dataclasses
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import ConfigError, check_fields
from ..io import sha256_file
from . import tasks as T
from .corpus import IGNORE, Corpus, CorpusConfig
from .mamba_scan import fast_mamba_scan
from .tokenizer import word_level_tokenizer
from .world import WorldConfig, build_world

log = logging.getLogger(__name__)

FAMILIES = ("llama", "mamba2", "mamba1", "zamba2")

# The one place for the per-family model size and recipe. "model": keyword arguments of the
# transformers config class (vocabulary size and special ids are added by `model_config`);
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
}


def family_presets() -> dict[str, dict[str, Any]]:
    """A deep copy of :data:`FAMILY_PRESETS` (safe to modify)."""
    return copy.deepcopy(FAMILY_PRESETS)


def _config_class(family: str):
    import transformers as tf
    classes = {"llama": tf.LlamaConfig, "mamba2": tf.Mamba2Config, "mamba1": tf.MambaConfig,
               "zamba2": tf.Zamba2Config}
    if family not in classes:
        raise ConfigError(f"unknown micro family {family!r}; known: {', '.join(FAMILIES)}")
    return classes[family]


def model_config(family: str, overrides: dict | None, vocab_size: int, bos_id: int = 1, eos_id: int = 2,
                 pad_id: int = 0):
    """The transformers config of ``family``: preset, then ``overrides``, then the vocabulary."""
    cls = _config_class(family)
    kw = {**FAMILY_PRESETS[family]["model"], **(overrides or {})}
    if family == "zamba2" and "layers_block_type" in kw:
        kw["num_hidden_layers"] = len(kw["layers_block_type"])
    kw.update(vocab_size=vocab_size, bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return cls(**kw)


def build_model(family: str, overrides: dict | None, vocab_size: int, seed: int = 0) -> torch.nn.Module:
    """A freshly initialised model of ``family`` (same seed, same weights)."""
    from transformers import AutoModelForCausalLM
    config = model_config(family, overrides, vocab_size)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


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


def resolve_train_config(family: str, train_config: TrainConfig | dict | None) -> TrainConfig:
    """TrainConfig defaults < the family preset < ``train_config`` (world/corpus merged by key)."""
    if family not in FAMILY_PRESETS:
        raise ConfigError(f"unknown micro family {family!r}; known: {', '.join(FAMILIES)}")
    given = train_config.to_dict() if isinstance(train_config, TrainConfig) else dict(train_config or {})
    merged = copy.deepcopy(FAMILY_PRESETS[family]["train"])
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


def lr_factor(step: int, cfg: TrainConfig | PhaseConfig | Any) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine to ``min_lr_ratio`` at ``decay_steps``."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.decay_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class _Schedule:
    lr: float
    warmup_steps: int
    decay_steps: int
    min_lr_ratio: float
    origin: int          # global step at which this schedule's step 0 is

    def lr_at(self, step: int) -> float:
        return self.lr * lr_factor(step - self.origin, self)


def _schedule(cfg: TrainConfig, phase: PhaseConfig | None, origin: int) -> _Schedule:
    def pick(name):
        v = getattr(phase, name) if phase is not None else None
        return getattr(cfg, name) if v is None else v
    return _Schedule(pick("lr"), pick("warmup_steps"), pick("decay_steps"), pick("min_lr_ratio"), origin)


# ------------------------------------------------------------------------ evaluation

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


# ------------------------------------------------------------------------ training

def _replace_dir(tmp: Path, out: Path) -> None:
    """Move ``tmp`` to ``out``, replacing an existing ``out`` (old copy removed afterwards)."""
    old = None
    if out.exists():
        old = out.with_name(f"{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def train(family: str, model_config_overrides: dict | None = None,
          train_config: TrainConfig | dict | None = None, out_dir: str | os.PathLike = "micro_model",
          seed: int = 0, resume: bool = True) -> dict[str, Any]:
    """Train a micro model of ``family`` and save it into ``out_dir``; returns the summary.

    ``model_config_overrides`` go to the transformers config on top of the family preset;
    ``train_config`` (dict or :class:`TrainConfig`) on top of the preset's recipe.

    Interruptions: at every evaluation the whole training state (weights, optimiser, schedule,
    the corpus's random stream, the log so far) is saved in ``<out_dir>.ckpt/step-<n>/``
    (:mod:`gna.micro.checkpoint`); with ``resume`` a rerun of the same configuration goes on
    from the newest complete one and ends with the same bytes as an uninterrupted run. The
    checkpoints are removed once ``out_dir`` is written.
    """
    from .checkpoint import TrainCheckpoints
    from tqdm.auto import tqdm

    cfg = resolve_train_config(family, train_config)
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    world = build_world(cfg.world)
    phases = cfg.phase_list()
    total = cfg.total_steps()
    corpus_cfg = CorpusConfig.from_dict(cfg.corpus)
    tok = word_level_tokenizer(T.micro_vocabulary(world))
    model = build_model(family, model_config_overrides, len(tok), seed)
    model.train()
    n_params = n_parameters(model)
    exclude = T.evaluation_fingerprints(world, kv_pairs=cfg.kv_eval_pairs, kv_count=cfg.eval_rows)
    corpus = Corpus(world, CorpusConfig.from_dict({**cfg.corpus, **phases[0].corpus}), tok.get_vocab(),
                    tok.bos_token_id, tok.pad_token_id, seed=seed, exclude=exclude)
    eval_sets = build_eval_sets(world, tok, cfg)

    def new_optimizer():
        return torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)

    opt = new_optimizer()
    sched = _schedule(cfg, phases[0] if phases[0].restart else None, 0)

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    resolved = {
        "family": family, "seed": seed, "model_config_overrides": model_config_overrides or {},
        "model_config": model.config.to_dict(), "train": cfg.to_dict(),
        "world": world.config.to_dict(), "corpus": corpus_cfg.to_dict(), "n_parameters": n_params,
        "phases": [{**ph.to_dict(), "corpus": CorpusConfig.from_dict({**cfg.corpus, **ph.corpus}).to_dict()}
                   for ph in phases],
        "versions": _versions(),
    }
    (tmp / "train_config.json").write_text(json.dumps(resolved, indent=1, sort_keys=True, default=str) + "\n")
    ckpts = TrainCheckpoints(out, {k: v for k, v in resolved.items() if k != "versions"})
    state = ckpts.latest() if resume else None
    if not resume:
        ckpts.clear()
    log.info("training %s (%d parameters) into %s: %d phase(s), at most %d steps", family, n_params, out,
             len(phases), total)

    columns = ["step", "phase", "tokens", "train_tokens", "loss", "lr", "elapsed_s", "steps_per_s",
               *[es.name for es in eval_sets], "targets_met"]
    log_file = open(tmp / "train_log.csv", "w", newline="")
    writer = csv.DictWriter(log_file, fieldnames=columns)
    start = time.perf_counter()
    tokens = train_tokens = 0
    losses: list[float] = []
    metrics: dict[str, float] = {}
    stopped = "max_steps"
    step = 0
    phase_log: list[dict[str, Any]] = []
    pi = 0
    resume_pi, resume_phase_start, evaluated_at = 0, None, -1
    if state is None:
        writer.writeheader()
    else:   # go on from the checkpoint: every piece of state the loop carries
        model.load_state_dict(state["model"])
        opt = new_optimizer()
        opt.load_state_dict(state["optimizer"])
        sched = _Schedule(**state["schedule"])
        corpus.set_config(CorpusConfig.from_dict({**cfg.corpus, **phases[state["phase"]].corpus}))
        corpus.rng.setstate(state["corpus_rng"])
        corpus.rejected = state["corpus_rejected"]
        torch.set_rng_state(state["torch_rng"])
        step, tokens, train_tokens = state["step"], state["tokens"], state["train_tokens"]
        metrics, phase_log = dict(state["metrics"]), list(state["phase_log"])
        resume_pi, resume_phase_start, evaluated_at = state["phase"], state["phase_start"], state["step"]
        start -= state["elapsed"]
        log_file.write(state["log"])
        log.info("resuming %s from its checkpoint at step %d (phase %r)", family, step, phases[resume_pi].name)

    def met(targets: dict[str, float]) -> bool:
        return bool(targets) and all(metrics.get(k, 0.0) >= v for k, v in targets.items())

    def do_eval(step_done: int, phase_name: str) -> None:
        nonlocal metrics, losses
        metrics = evaluate(model, eval_sets, tok.pad_token_id)
        elapsed = time.perf_counter() - start
        row = {"step": step_done, "phase": phase_name, "tokens": tokens, "train_tokens": train_tokens,
               "loss": round(sum(losses) / len(losses), 5) if losses else "",
               "lr": f"{opt.param_groups[0]['lr']:.6g}", "elapsed_s": round(elapsed, 2),
               "steps_per_s": round(step_done / elapsed, 4) if elapsed > 0 else "",
               **{k: round(v, 4) for k, v in metrics.items()}, "targets_met": met(cfg.targets)}
        writer.writerow(row)
        log_file.flush()
        log.info("step %d (%s) loss %s %s", step_done, phase_name, row["loss"],
                 " ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
        losses = []

    scan_ctx = fast_mamba_scan(family == "mamba1" and cfg.fast_scan)
    scan_ctx.__enter__()
    try:
        if cfg.eval_at_start and state is None:
            do_eval(0, phases[0].name)
        import sys
        bar = tqdm(total=total, initial=step, desc=f"train {family}", disable=not cfg.progress, dynamic_ncols=True,
                   mininterval=0.5 if sys.stderr.isatty() else 30.0)   # a log file gets a line per 30 s
        done = False
        for pi, phase in enumerate(phases):
            if pi < resume_pi:
                continue
            last = pi == len(phases) - 1
            resuming = state is not None and pi == resume_pi
            if pi > 0 and not resuming:
                corpus.set_config(CorpusConfig.from_dict({**cfg.corpus, **phase.corpus}))
                if phase.restart:
                    opt = new_optimizer()
                    sched = _schedule(cfg, phase, step)
            phase_start = resume_phase_start if resuming else step
            phase_end = min(total, phase_start + phase.steps)
            phase_stop = "steps"
            log.info("phase %d/%d %r: steps %d..%d%s", pi + 1, len(phases), phase.name, phase_start, phase_end,
                     " (fresh optimiser)" if phase.restart and pi > 0 else "")
            while step < phase_end:
                inp, lab = corpus.batch(step, cfg.batch_size)
                for g in opt.param_groups:
                    g["lr"] = sched.lr_at(step)
                logits = model(input_ids=inp).logits
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                       lab[:, 1:].reshape(-1), ignore_index=IGNORE)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                step += 1
                tokens += int((inp != tok.pad_token_id).sum())
                train_tokens += int((lab != IGNORE).sum())
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(phase=phase.name or pi, loss=f"{losses[-1]:.3f}",
                                **{k: f"{metrics[k]:.2f}" for k in ("kv8", "knowledge", "mmlu") if k in metrics})
                over_time = cfg.max_seconds is not None and time.perf_counter() - start > cfg.max_seconds
                if step % cfg.eval_every == 0 or step == total or over_time:
                    evaluated_at = step
                    do_eval(step, phase.name)
                    if last and met(cfg.targets):
                        stopped, phase_stop, done = "targets", "targets", True
                        break
                    if met(phase.targets):
                        phase_stop = "targets"
                        break
                if over_time:
                    stopped, phase_stop, done = "max_seconds", "max_seconds", True
                    break
                if evaluated_at == step:   # the phase goes on from here: a complete state to resume from
                    log_file.flush()
                    ckpts.save(step, {
                        "model": model.state_dict(), "optimizer": opt.state_dict(),
                        "schedule": dataclasses.asdict(sched), "phase": pi, "phase_start": phase_start,
                        "corpus_rng": corpus.rng.getstate(), "corpus_rejected": corpus.rejected,
                        "torch_rng": torch.get_rng_state(), "step": step, "tokens": tokens,
                        "train_tokens": train_tokens, "metrics": dict(metrics), "phase_log": list(phase_log),
                        "elapsed": time.perf_counter() - start,
                        "log": (tmp / "train_log.csv").read_text()})
            phase_log.append({"name": phase.name, "start": phase_start, "end": step, "stopped": phase_stop,
                              "metrics": dict(metrics)})
            if done or step >= total:
                break
        if evaluated_at != step:
            do_eval(step, phases[min(pi, len(phases) - 1)].name)
        bar.close()
    finally:
        log_file.close()
        scan_ctx.__exit__(None, None, None)

    seconds = time.perf_counter() - start
    model.eval()
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    summary = {"family": family, "seed": seed, "steps": step, "stopped": stopped, "seconds": round(seconds, 2),
               "steps_per_s": round(step / seconds, 4) if seconds else None, "tokens": tokens,
               "train_tokens": train_tokens, "n_parameters": n_params, "metrics": metrics,
               "corpus_rejected_draws": corpus.rejected, "phases": phase_log}
    (tmp / "train_summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    _replace_dir(tmp, out)
    ckpts.clear()
    summary["out_dir"] = str(out)
    return summary


def _versions() -> dict[str, str]:
    import tokenizers
    import transformers
    v = {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    try:
        import mambapy  # noqa: F401
        from importlib.metadata import version
        v["mambapy"] = version("mambapy")
    except Exception:  # pragma: no cover - optional
        pass
    return v


# ------------------------------------------------------------------------ comparison

def compare_model_dirs(shipped: str | os.PathLike, retrained: str | os.PathLike) -> dict[str, Any]:
    """Compare a retrained micro model directory with the shipped one: the sha256 of
    ``model.safetensors`` (``identical`` when equal), the largest absolute difference of any
    tensor when not, whether the resolved training configs agree (library versions aside),
    and both runs' steps, stop reason and final metrics."""
    a, b = Path(shipped), Path(retrained)
    out: dict[str, Any] = {"shipped": str(a), "retrained": str(b)}
    ha, hb = sha256_file(a / "model.safetensors"), sha256_file(b / "model.safetensors")
    out.update(sha256_shipped=ha, sha256_retrained=hb, identical=ha is not None and ha == hb)
    if ha and hb and ha != hb:
        from safetensors.torch import load_file
        ta, tb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
        if set(ta) != set(tb):
            out["max_abs_diff"] = None
            out["tensor_names_differ"] = sorted(set(ta) ^ set(tb))
        else:
            out["max_abs_diff"] = max(float((ta[k].float() - tb[k].float()).abs().max()) if ta[k].shape == tb[k].shape
                                      else float("inf") for k in ta)

    def read(d: Path, name: str) -> dict:
        p = d / name
        return json.loads(p.read_text()) if p.is_file() else {}

    ca, cb = read(a, "train_config.json"), read(b, "train_config.json")
    for c in (ca, cb):   # display-only: the progress bar does not change the training
        c.get("train", {}).pop("progress", None)
    out["versions_shipped"], out["versions_retrained"] = ca.pop("versions", None), cb.pop("versions", None)
    out["same_config"] = bool(ca) and ca == cb
    for tag, d in (("shipped", a), ("retrained", b)):
        s = read(d, "train_summary.json")
        out[f"steps_{tag}"], out[f"stopped_{tag}"] = s.get("steps"), s.get("stopped")
        out[f"seconds_{tag}"], out[f"metrics_{tag}"] = s.get("seconds"), s.get("metrics")
    return out
