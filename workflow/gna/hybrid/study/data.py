"""The data the hybrid students are distilled on, and the token budgets of each stage.

Two sources, one interface (what :func:`gna.hybrid.distillation.distill` takes as ``data_iter``):

- ``micro``: rows of :class:`gna.micro.corpus.Corpus` from the study's own world (the facts,
  dictionaries, records, passages and MMLU-format questions the micro models were trained on),
  tokenized by the teacher's word-level tokenizer. Random access: the batch of step ``s`` is a
  pure function of ``(seed, s)``, so a resumed stage reads exactly the batches it would have.
- ``web`` (paper scale): fineweb-edu and finemath (:mod:`gna.hybrid.study.web_stream`), mixed
  per stage with ``by_stage`` (see :func:`stage_data`). In the workflow, rule ``distill_tokens``
  tokenizes each mix once into shard files and the jobs read those offline, with random access
  (:mod:`gna.hybrid.study.token_shards`; ``make_stream(..., shards=folder)``). Without a folder,
  the stream itself (a re-iterable that needs the Hub: a resumed stage replays it from its start).

Budgets follow the follow-up paper (``gna.hybrid.stage_settings.PAPER_TOKENS``: 3e8, 5e9, 2e10 tokens for
stages 1-3): a stage runs ``steps`` optimizer steps, or ``ceil(tokens / (batch x seq_len))``
when only ``tokens`` is given, and stops early once ``tokens`` real tokens were seen.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

from ...errors import ConfigError
from .web_stream import WebStream, web_sources

# torch is imported where tensors are made: the workflow reads stage_steps and stage_data when it
# is parsed (gna.hybrid.study.token_sets), and a parse must not pay torch's import.
MICRO_CORPUS = {"curriculum_steps": 0}  # full difficulty from the first step: the teacher is trained


def stage_steps(steps: int | None, tokens: float | None, batch_size: int, seq_len: int) -> int:
    """Optimizer steps of a stage: ``steps`` if given, else enough batches for ``tokens``."""
    if steps:
        return int(steps)
    if not tokens:
        raise ConfigError("a distillation stage needs steps or tokens")
    return math.ceil(float(tokens) / (batch_size * seq_len))


# --------------------------------------------------------------------------------- micro

def world_of(tasks_dir: str | None) -> dict:
    """The world config the micro tasks in ``tasks_dir`` were generated from (``world.json``)."""
    if tasks_dir is None:
        return {}
    p = Path(tasks_dir) / "world.json"
    return json.loads(p.read_text())["config"] if p.is_file() else {}


def micro_stream(tokenizer, world: dict | None, batch_size: int, seed: int = 0, corpus: dict | None = None,
                 purpose: str = "distill") -> Callable[[int], dict]:
    """``step -> {"input_ids", "attention_mask", "labels"}``: ``batch_size`` micro-corpus rows,
    right-padded. ``labels`` marks the tokens the micro models were trained on (answers, fact values,
    induction repeats, answer letters; -100 elsewhere): distillation uses every real token, the
    held-out perplexity only these (the rest, e.g. fresh random dictionary keys, is unpredictable
    by construction and was never trained)."""
    from ...micro import tasks as T
    from ...micro.corpus import Corpus, CorpusConfig
    from ...micro.world import build_world

    w = build_world(world or {})
    cfg = CorpusConfig.from_dict({**MICRO_CORPUS, **(corpus or {})})
    exclude = T.evaluation_fingerprints(w)
    vocab, bos, pad = tokenizer.get_vocab(), tokenizer.bos_token_id, tokenizer.pad_token_id
    if pad is None:
        pad = tokenizer.eos_token_id

    def batch(step: int) -> dict:
        import torch

        c = Corpus(w, cfg, vocab, bos, pad, seed=f"{purpose}/{seed}/{step}", exclude=exclude)
        ids, labels = c.batch(step, batch_size)
        am = torch.zeros_like(ids)
        for i in range(ids.shape[0]):  # right padding: real tokens are the prefix up to the last non-pad
            real = (ids[i] != pad).nonzero()
            am[i, : int(real.max()) + 1 if len(real) else 0] = 1
        return {"input_ids": ids, "attention_mask": am, "labels": labels}

    return batch


# --------------------------------------------------------------------------------- both

def make_stream(data: dict, tokenizer, tasks_dir: str | None, seed: int = 0, purpose: str = "distill",
                shards: str | None = None):
    """The stream a ``data`` config names: ``{source: micro, batch_size, corpus?}`` or
    ``{source: web, batch_size, seq_len, sources?, mixing?}``. ``purpose`` separates training from
    held-out data (``heldout``). Web data with ``shards`` (a folder rule distill_tokens wrote for
    this mix and split) is read from there, offline, with random access."""
    source = data.get("source", "micro")
    if source == "micro":
        return micro_stream(tokenizer, world_of(tasks_dir), int(data.get("batch_size", 16)), seed,
                            data.get("corpus"), purpose)
    if source != "web":
        raise ConfigError(f"data source {source!r} is not 'micro' or 'web'")
    seq_len, batch = int(data.get("seq_len", 2048)), int(data.get("batch_size", 32))
    if shards is not None:
        from .token_shards import TokenShards

        stream = TokenShards(shards, batch)
        if stream.seq_len != seq_len:
            raise ConfigError(f"the prepared tokens in {shards} are rows of {stream.seq_len} tokens, the data "
                              f"config asks for seq_len {seq_len}: rerun rule distill_tokens")
        return stream
    return WebStream(tokenizer, web_sources(data), seq_len, batch, seed, mixing=data.get("mixing", "sample"),
                     split="heldout" if purpose == "heldout" else "train")


def stage_data(data: dict | None, stage: int) -> dict:
    """The data config of one distillation stage: ``data`` with ``data["by_stage"][stage - 1]`` (a
    dict, or null for none) merged over it, key by key, and ``by_stage`` removed. Without
    ``by_stage``, ``data`` itself (every stage reads the same data).

    goombalab/mohawk draws each stage from its own mix (``configs/Llama/1B/bases/``): stage 1
    (``_matrices.yaml``) fineweb-edu only, at an effective batch of 64; stage 2 (``_hstates.yaml``)
    fineweb-edu and finemath in turn (``ratio`` unset: 1:1; a ``ratio: [9, 1]`` is commented out);
    stage 3 (``_supervised.yaml``) the two at ``ratio: [1, 1]``; stages 2-3 at 128 (``train.yaml``).
    For the micro source, ``by_stage`` may set ``batch_size`` or ``corpus`` overrides the same way.
    """
    data = dict(data or {"source": "micro"})
    by_stage = data.pop("by_stage", None)
    if by_stage is None:
        return data
    if len(by_stage) != 3:
        raise ConfigError(f"data.by_stage has {len(by_stage)} entries, not 3 (one per stage)")
    return {**data, **(by_stage[stage - 1] or {})}


def seq_len_of(data: dict) -> int:
    """Tokens per row for budgeting: ``seq_len`` (web) or the micro corpus' ``max_len``."""
    if data.get("source", "micro") == "web":
        return int(data.get("seq_len", 2048))
    from ...micro.corpus import CorpusConfig
    return CorpusConfig.from_dict({**MICRO_CORPUS, **(data.get("corpus") or {})}).max_len


def heldout_perplexity(model, stream, n_batches: int, positions_per_chunk: int = 1024) -> float:
    """Next-token perplexity over ``n_batches`` batches of ``stream``: over the tokens a batch's
    ``labels`` mark (-100: not scored) if it has them, else over every real token.

    Memory: the LM head runs on ``positions_per_chunk`` token positions at a time (as stage 3's
    loss does), float32 logits and their log-softmax for that many positions only; a batch of
    32 x 2047 tokens with a 128k vocabulary would otherwise hold ~67 GB of logits at once.
    """
    import torch

    from ...probes.scoring import fp32_logits

    if getattr(model.config, "final_logit_softcapping", None) is not None:
        raise ConfigError(f"heldout_perplexity: {type(model).__name__}'s logits are not lm_head(hidden) "
                          "(final_logit_softcapping)")
    head = model.get_output_embeddings()
    vocab = getattr(model.config, "vocab_size", head.weight.shape[0])
    with torch.no_grad(), fp32_logits(model):
        device = next(model.parameters()).device
        batches = (stream(i) for i in range(n_batches)) if callable(stream) else stream
        nll, count = 0.0, 0
        for i, b in enumerate(batches):
            if i >= n_batches:
                break
            ids = b["input_ids"].to(device)
            am = b.get("attention_mask")
            am = torch.ones_like(ids) if am is None else am.to(device)
            hidden = _final_hidden(model, head, ids, am)[:, :-1].flatten(0, 1)      # (B (T-1), d)
            targets = ids[:, 1:].flatten()
            labels = b.get("labels")
            w = (am[:, 1:] * am[:, :-1]) if labels is None else (labels[:, 1:] != -100).to(device)
            w = w.flatten().float()
            for start in range(0, hidden.shape[0], positions_per_chunk):
                part = slice(start, start + positions_per_chunk)
                lp = head(hidden[part]).float()[:, :vocab].log_softmax(-1)         # (chunk, V) float32
                nll -= float((lp.gather(-1, targets[part, None])[:, 0] * w[part]).sum())
            count += int(w.sum())
        return math.exp(nll / max(count, 1))


def _final_hidden(model, head, ids, am):
    """The LM head's input (B, T, d) over the whole batch, from one forward in which the head
    itself projects the last position only (so no (B, T, V) logits are made)."""
    seen = []

    def take(module, args):
        seen.append(args[0])
        return (args[0][:, -1:],)

    handle = head.register_forward_pre_hook(take)
    try:
        model(input_ids=ids, attention_mask=am, use_cache=False)
    finally:
        handle.remove()
    return seen[0]


# --------------------------------------------------------------------------------- checkpoints

def input_stamp(*paths) -> list:
    """Size and mtime of every file under ``paths`` (strings, or lists of them, as Snakemake's
    named inputs come): changes when an input is rewritten."""
    flat = [x for p in paths for x in ([p] if isinstance(p, (str, Path)) else list(p))]
    out = []
    for p in map(Path, flat):
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p] if p.exists() else []
        out += [[str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in files if not f.name.startswith(".")]
    return out


def checkpoint_dir(path, job: dict) -> Path:
    """The resumable-checkpoint folder of one job, ``job`` describing what it trains (teacher,
    heads, inputs, hyperparameters; not the budget, so a longer run continues a shorter one).

    Checkpoints written for another job (an input or a hyperparameter changed since a run was
    interrupted) are removed: the stage restarts cleanly instead of resuming the wrong run.
    """
    import shutil

    from ...io import write_json

    p = Path(path)
    marker = p / "job.json"
    if p.exists():
        same = marker.is_file() and json.loads(marker.read_text()) == json.loads(json.dumps(job, default=str))
        if not same:
            shutil.rmtree(p)
    p.mkdir(parents=True, exist_ok=True)
    if not marker.is_file():
        write_json(job, marker)
    return p
