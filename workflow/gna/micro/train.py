"""Training of the micro models: transformers' own classes, seeded, one CPU thread.

``train(family, model_config_overrides, train_config, out_dir, seed)`` builds a model of
``family`` (:mod:`gna.micro.family_models`), trains it on :class:`gna.micro.corpus.Corpus` rows
with AdamW, linear warm-up then cosine decay (:mod:`gna.micro.lr_schedule`) and gradient
clipping, in one or more *phases* (:class:`gna.micro.recipes.PhaseConfig`: each with its own
corpus settings, optionally a fresh optimiser and warm-up, and targets that end it), evaluates
every ``eval_every`` steps (:mod:`gna.micro.eval_sets`: loss, KV accuracy at 4/8/16 pairs,
knowledge, MMLU-format, and greedy exact match on the SWDE/LAMBADA/chain analogues), stops early
once every ``targets`` threshold is met in the last phase, and saves a directory that loads like
a Hugging Face model: ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
``AutoTokenizer.from_pretrained(out_dir)``, plus ``train_config.json`` (everything needed to
rerun), ``train_log.csv`` (one row per evaluation) and ``train_summary.json`` (final metrics,
phases, wall time). The directory appears atomically: it is written into a temporary folder
beside it and renamed (:func:`gna.io.atomic_path`).

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

The per-family model sizes and recipes live in :data:`gna.micro.recipes.FAMILY_PRESETS` (the
one place; the pipeline config references and overrides them).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..io import atomic_path
from . import tasks as T
from .corpus import IGNORE, Corpus, CorpusConfig
from .eval_sets import EvalSet, build_eval_sets, evaluate
from .family_models import build_model, n_parameters
from .lr_schedule import LRSchedule, phase_schedule
from .mamba_scan import fast_mamba_scan
from .recipes import PhaseConfig, TrainConfig, resolve_train_config
from .tokenizer import word_level_tokenizer
from .world import build_world

log = logging.getLogger(__name__)


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

    cfg = resolve_train_config(family, train_config)
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    world = build_world(cfg.world)
    phases = cfg.phase_list()
    tok = word_level_tokenizer(T.micro_vocabulary(world))
    model = build_model(family, model_config_overrides, len(tok), seed)
    model.train()
    n_params = n_parameters(model)
    exclude = T.evaluation_fingerprints(world, kv_pairs=cfg.kv_eval_pairs, kv_count=cfg.eval_rows)
    corpus = Corpus(world, CorpusConfig.from_dict({**cfg.corpus, **phases[0].corpus}), tok.get_vocab(),
                    tok.bos_token_id, tok.pad_token_id, seed=seed, exclude=exclude)
    run = _Run(family, cfg, phases, model, tok, corpus, build_eval_sets(world, tok, cfg))

    out = Path(out_dir)
    with atomic_path(out, directory=True) as tmp:
        resolved = _resolved_config(family, seed, model_config_overrides, model, cfg, world, phases, n_params)
        (tmp / "train_config.json").write_text(json.dumps(resolved, indent=1, sort_keys=True, default=str) + "\n")
        ckpts = TrainCheckpoints(out, _same_run(resolved))
        state = ckpts.latest() if resume else None
        if state is not None and state["step"] > run.total:   # a longer run's checkpoint: past this budget
            log.warning("%s is at step %d, past this run's %d steps: starting afresh", ckpts.root, state["step"],
                        run.total)
            state = None
        if not resume:
            ckpts.clear()
        log.info("training %s (%d parameters) into %s: %d phase(s), at most %d steps", family, n_params, out,
                 len(phases), run.total)
        run.run(tmp / "train_log.csv", ckpts, state)
        seconds = time.perf_counter() - run.start
        model.eval()
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        summary = {"family": family, "seed": seed, "steps": run.step, "stopped": run.stopped,
                   "seconds": round(seconds, 2), "steps_per_s": round(run.step / seconds, 4) if seconds else None,
                   "tokens": run.tokens, "train_tokens": run.train_tokens, "n_parameters": n_params,
                   "metrics": run.metrics, "corpus_rejected_draws": corpus.rejected, "phases": run.phase_log}
        (tmp / "train_summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    ckpts.clear()
    summary["out_dir"] = str(out)
    return summary


def _resolved_config(family: str, seed: int, model_config_overrides: dict | None, model, cfg: TrainConfig,
                     world, phases: list[PhaseConfig], n_params: int) -> dict[str, Any]:
    """``train_config.json``: everything needed to rerun; less the versions, what makes two runs
    the same run (the checkpoints' fingerprint)."""
    return {
        "family": family, "seed": seed, "model_config_overrides": model_config_overrides or {},
        "model_config": model.config.to_dict(), "train": cfg.to_dict(),
        "world": world.config.to_dict(), "corpus": CorpusConfig.from_dict(cfg.corpus).to_dict(),
        "n_parameters": n_params,
        "phases": [{**ph.to_dict(), "corpus": CorpusConfig.from_dict({**cfg.corpus, **ph.corpus}).to_dict()}
                   for ph in phases],
        "versions": _versions(),
    }


def _same_run(resolved: dict[str, Any]) -> dict[str, Any]:
    """What makes two runs the same run (the checkpoints' fingerprint): the resolved configuration less
    the versions and the step budget (``max_steps`` and the last phase's ``steps``). The schedule and
    the curriculum follow the global step, not the budget, so a run given more steps passes through the
    same states, and a checkpoint of a shorter run goes on under a longer budget."""
    def last_unbudgeted(phases):
        return [*phases[:-1], {k: v for k, v in phases[-1].items() if k != "steps"}] if phases else phases

    same = {k: v for k, v in resolved.items() if k != "versions"}
    same["train"] = {k: v for k, v in same["train"].items() if k != "max_steps"}
    same["train"]["phases"] = last_unbudgeted(same["train"].get("phases"))
    same["phases"] = last_unbudgeted(same.get("phases"))
    return same


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


class _Run:
    """One training run's loop and everything it carries from step to step: exactly what a
    checkpoint saves, so that a resumed run goes on with the same state as an uninterrupted one."""

    def __init__(self, family: str, cfg: TrainConfig, phases: list[PhaseConfig], model, tok, corpus: Corpus,
                 eval_sets: list[EvalSet]):
        self.family, self.cfg, self.phases = family, cfg, phases
        self.model, self.tok, self.corpus, self.eval_sets = model, tok, corpus, eval_sets
        self.total = cfg.total_steps()
        self.opt = self._new_optimizer()
        self.sched = phase_schedule(cfg, phases[0] if phases[0].restart else None, 0)
        self.step = self.tokens = self.train_tokens = 0
        self.losses: list[float] = []
        self.metrics: dict[str, float] = {}
        self.phase_log: list[dict[str, Any]] = []
        self.stopped = "max_steps"
        self.resume_pi, self.resume_phase_start, self.evaluated_at = 0, None, -1
        self.start = 0.0     # perf_counter() when the loop starts (a resumed run: minus its elapsed time)

    def _new_optimizer(self) -> torch.optim.AdamW:
        cfg = self.cfg
        return torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)

    def run(self, log_path: Path, ckpts, state: dict[str, Any] | None) -> None:
        """Train through the phases (from ``state``, a checkpoint, where given), logging to ``log_path``."""
        from tqdm.auto import tqdm

        self.log_path, self.ckpts = log_path, ckpts
        self.start = time.perf_counter()
        columns = ["step", "phase", "tokens", "train_tokens", "loss", "lr", "elapsed_s", "steps_per_s",
                   *[es.name for es in self.eval_sets], "targets_met"]
        with open(log_path, "w", newline="") as self.log_file, \
                fast_mamba_scan(self.family == "mamba1" and self.cfg.fast_scan):
            self.writer = csv.DictWriter(self.log_file, fieldnames=columns)
            if state is None:
                self.writer.writeheader()
            else:
                self._restore(state)
            if self.cfg.eval_at_start and state is None:
                self._evaluate(0, self.phases[0].name)
            # a log file gets a line per 30 s
            bar = tqdm(total=self.total, initial=self.step, desc=f"train {self.family}", disable=not self.cfg.progress,
                       dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 30.0)
            pi = 0
            for pi, phase in enumerate(self.phases):
                if pi < self.resume_pi:
                    continue
                done = self._run_phase(pi, phase, state is not None and pi == self.resume_pi, bar)
                if done or self.step >= self.total:
                    break
            if self.evaluated_at != self.step:
                self._evaluate(self.step, self.phases[min(pi, len(self.phases) - 1)].name)
            bar.close()

    def _restore(self, state: dict[str, Any]) -> None:
        """Go on from a checkpoint: every piece of state the loop carries."""
        self.model.load_state_dict(state["model"])
        self.opt = self._new_optimizer()
        self.opt.load_state_dict(state["optimizer"])
        self.sched = LRSchedule(**state["schedule"])
        self.corpus.set_config(CorpusConfig.from_dict({**self.cfg.corpus, **self.phases[state["phase"]].corpus}))
        self.corpus.rng.setstate(state["corpus_rng"])
        self.corpus.rejected = state["corpus_rejected"]
        torch.set_rng_state(state["torch_rng"])
        self.step, self.tokens, self.train_tokens = state["step"], state["tokens"], state["train_tokens"]
        self.metrics, self.phase_log = dict(state["metrics"]), list(state["phase_log"])
        self.resume_pi, self.resume_phase_start, self.evaluated_at = state["phase"], state["phase_start"], state["step"]
        self.start -= state["elapsed"]
        self.log_file.write(state["log"])
        log.info("resuming %s from its checkpoint at step %d (phase %r)", self.family, self.step,
                 self.phases[self.resume_pi].name)

    def _run_phase(self, pi: int, phase: PhaseConfig, resuming: bool, bar) -> bool:
        """Phase ``pi`` until its steps or targets; True when the whole run stops with it."""
        cfg = self.cfg
        last = pi == len(self.phases) - 1
        if pi > 0 and not resuming:
            self.corpus.set_config(CorpusConfig.from_dict({**cfg.corpus, **phase.corpus}))
            if phase.restart:
                self.opt = self._new_optimizer()
                self.sched = phase_schedule(cfg, phase, self.step)
        phase_start = self.resume_phase_start if resuming else self.step
        phase_end = min(self.total, phase_start + phase.steps)
        phase_stop, done = "steps", False
        log.info("phase %d/%d %r: steps %d..%d%s", pi + 1, len(self.phases), phase.name, phase_start, phase_end,
                 " (fresh optimiser)" if phase.restart and pi > 0 else "")
        while self.step < phase_end:
            self._optimizer_step()
            bar.update(1)
            bar.set_postfix(phase=phase.name or pi, loss=f"{self.losses[-1]:.3f}",
                            **{k: f"{self.metrics[k]:.2f}" for k in ("kv8", "knowledge", "mmlu") if k in self.metrics})
            over_time = cfg.max_seconds is not None and time.perf_counter() - self.start > cfg.max_seconds
            if self.step % cfg.eval_every == 0 or self.step == self.total or over_time:
                self.evaluated_at = self.step
                self._evaluate(self.step, phase.name)
                if last and self._met(cfg.targets):
                    self.stopped, phase_stop, done = "targets", "targets", True
                    break
                if self._met(phase.targets):
                    phase_stop = "targets"
                    break
            if over_time:
                self.stopped, phase_stop, done = "max_seconds", "max_seconds", True
                break
            if self.evaluated_at == self.step:   # the phase goes on from here: a complete state to resume from
                self._save_checkpoint(pi, phase_start)
        self.phase_log.append({"name": phase.name, "start": phase_start, "end": self.step, "stopped": phase_stop,
                               "metrics": dict(self.metrics)})
        return done

    def _optimizer_step(self) -> None:
        inp, lab = self.corpus.batch(self.step, self.cfg.batch_size)
        for g in self.opt.param_groups:
            g["lr"] = self.sched.lr_at(self.step)
        logits = self.model(input_ids=inp).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                               lab[:, 1:].reshape(-1), ignore_index=IGNORE)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.step += 1
        self.tokens += int((inp != self.tok.pad_token_id).sum())
        self.train_tokens += int((lab != IGNORE).sum())
        self.losses.append(loss.item())

    def _met(self, targets: dict[str, float]) -> bool:
        return bool(targets) and all(self.metrics.get(k, 0.0) >= v for k, v in targets.items())

    def _evaluate(self, step_done: int, phase_name: str) -> None:
        """Score the eval sets and log one row (the training loss: the mean since the last row)."""
        self.metrics = evaluate(self.model, self.eval_sets, self.tok.pad_token_id)
        elapsed = time.perf_counter() - self.start
        losses = self.losses
        row = {"step": step_done, "phase": phase_name, "tokens": self.tokens, "train_tokens": self.train_tokens,
               "loss": round(sum(losses) / len(losses), 5) if losses else "",
               "lr": f"{self.opt.param_groups[0]['lr']:.6g}", "elapsed_s": round(elapsed, 2),
               "steps_per_s": round(step_done / elapsed, 4) if elapsed > 0 else "",
               **{k: round(v, 4) for k, v in self.metrics.items()}, "targets_met": self._met(self.cfg.targets)}
        self.writer.writerow(row)
        self.log_file.flush()
        log.info("step %d (%s) loss %s %s", step_done, phase_name, row["loss"],
                 " ".join(f"{k} {v:.3f}" for k, v in self.metrics.items()))
        self.losses = []

    def _save_checkpoint(self, pi: int, phase_start: int) -> None:
        self.log_file.flush()
        self.ckpts.save(self.step, {
            "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
            "schedule": dataclasses.asdict(self.sched), "phase": pi, "phase_start": phase_start,
            "corpus_rng": self.corpus.rng.getstate(), "corpus_rejected": self.corpus.rejected,
            "torch_rng": torch.get_rng_state(), "step": self.step, "tokens": self.tokens,
            "train_tokens": self.train_tokens, "metrics": dict(self.metrics), "phase_log": list(self.phase_log),
            "elapsed": time.perf_counter() - self.start,
            "log": self.log_path.read_text()})
