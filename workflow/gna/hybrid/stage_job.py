"""One distillation stage as a job: build (or load) the student, run the stage from its checkpoint,
write the student. Rule ``distill_matrices`` runs stage 1, rule ``distill_stage`` stages 2-3.

Stage 1 aligns the SSM mixers of a student without attention: it is shared by every k and
selection of a state size. Stage 2 builds the student with its kept heads (top-k of the KV
ranking, or k random heads drawn with the variant's seed) around the stage-1 mixers; stage 3
continues stage 2. Resumable: checkpoints go to ``ckpt`` (not an output); the output appears
complete or not at all.

On several ranks (``hybrid_distillation.gpus_per_stage`` x ``nodes``, started by
:mod:`gna.hybrid.stage_launch`) every rank runs :func:`distill_stage_job` on its rows of each batch
(gna.hybrid.distributed); rank 0 alone prepares the checkpoint folder and writes the output.
``python -m gna.hybrid.stage_job ARGS.json`` is one rank (what torchrun / srun start).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time

import torch

from ..io import atomic_path, write_json
from ..models import describe, load_model
from .distillation import distill
from .stage_settings import stage_options
from .distributed import current, process_group
from .sharding import full_state_dict, is_sharded
from .student import build_student, heads_from_ranking, random_heads
from .study.data import checkpoint_dir, input_stamp, make_stream, seq_len_of, stage_data, stage_steps

log = logging.getLogger("gna.hybrid.stage_job")  # also when run as __main__ (a rank)


def stage_student(teacher, run: dict, state: int, k: int, selection: str, spec: dict,
                  previous: str | None, ranking: str | None):
    """The student a stage starts from and its kept heads ``[(layer, head)]``: stage 3 loads stage
    2's; stages 1-2 build one (stage 2 around the stage-1 mixers in ``previous``)."""
    import pandas as pd

    def local(path):
        return load_model({"path": path, "dtype": spec["dtype"], "device": spec["device"]}, with_tokenizer=False)[0]

    stage = run["stage"]
    if stage == 3:
        student = local(previous)
        return student, student.config.kept_heads
    if k == 0:
        heads = []
    elif selection == "ranked":
        heads = heads_from_ranking(pd.read_csv(ranking), k)
    else:  # selection "random<draw>": the heads are drawn with seed <draw> (the student's init and
        # data keep the run's seed, so the draws differ in their heads only)
        heads = random_heads(describe(teacher), k, int(selection.removeprefix("random") or run["seed"]))
    student = build_student(teacher, heads, state, chunk_size=run["chunk_size"], combine=run["combine"],
                            ssm_init=run["ssm_init"], seed=int(run["seed"]),
                            adapter_init=run.get("adapter_init", "identity"))
    if stage == 2:  # the stage-1 mixers (the rest are the teacher's copies, or the kept heads)
        aligned = {n: t for n, t in local(previous).state_dict().items() if ".mixer." in n}
        missing = [n for n in student.state_dict() if ".mixer." in n and n not in aligned]
        if missing:
            raise ValueError(f"stage-1 student {previous} lacks mixer weights {missing[:3]}: other state size?")
        student.load_state_dict(aligned, strict=False)
    return student, heads


def distill_stage_job(spec: dict, run: dict, state: int, k: int, selection: str, out, ckpt, micro_data,
                      teacher_input, previous: str | None = None, ranking: str | None = None,
                      tokens: str | None = None, save_every: int = 50, parallel: dict | None = None) -> dict:
    """Run stage ``run["stage"]`` (a ``DISTILL_STAGE`` entry of the workflow) and write the student to
    ``out``; ``tokens``: the prepared web tokens (rule distill_tokens), None for micro data;
    ``parallel``: :func:`gna.hybrid.distillation.distill`'s sharding arguments
    (:func:`gna.hybrid.stage_launch.parallel_settings`)."""
    stage, seed, world = run["stage"], int(run["seed"]), current()
    data_cfg = stage_data(run["data"], stage)  # the rule passes this stage's data already; by_stage: see there
    world.rows(int(data_cfg.get("batch_size", 16)))  # the batch splits over the ranks: checked before any work
    teacher, tok = load_model(spec)
    student, heads = stage_student(teacher, run, state, k, selection, spec, previous, ranking)
    mode = "sharded" if world.size > 1 and (parallel or {}).get("sharding_mode") == "sharded" else "replicated"
    log.info("stage %d (%s): %s student, state %d, kept heads %s, %s on %d rank(s)", stage, run["name"], selection,
             state, heads, mode, world.size)
    data = make_stream(data_cfg, tok, micro_data, seed, purpose=f"stage{stage}", shards=tokens)
    steps = stage_steps(run["steps"], run["tokens"], int(data_cfg.get("batch_size", 16)), seq_len_of(data_cfg))
    # the checkpoint folder ignores the budgets and the memory knobs: a job that ran out of memory
    # resumes from its checkpoints with a smaller micro_batch_size / vocab_chunk
    ident = {key: v for key, v in run.items() if key not in ("steps", "tokens", "micro_batch_size", "vocab_chunk")}
    ident = {**ident, "teacher": spec, "heads": [list(h) for h in heads], "state": state, "selection": selection,
             "inputs": input_stamp(previous or [], teacher_input)}
    with world.main_only() as main:
        if main:
            checkpoint_dir(ckpt, ident)
    start = time.time()
    result = distill(teacher, student, stage, data, steps, run["lr"], ckpt, resume=True, max_tokens=run["tokens"],
                     seed=seed, save_every=save_every, micro_batch_size=run.get("micro_batch_size"),
                     vocab_chunk=run.get("vocab_chunk"), **stage_options(run, stage), **(parallel or {}))
    losses = result["losses"] or [float("nan")]
    full = full_state_dict(student) if is_sharded(student) else None  # every rank takes part; rank 0 gets it
    if not world.main:
        return result
    log.info("stage %d: %d steps, %d tokens, loss %.4f -> %.4f (resumed from step %d), %.1f s", stage,
             result["step"], result["tokens"], losses[0], losses[-1], result["resumed_from"], time.time() - start)
    with atomic_path(out, directory=True) as tmp:
        save_student(student, tmp, full)
        tok.save_pretrained(tmp)
        write_json({"stage": stage, "name": run["name"], "steps": result["step"], "tokens": result["tokens"],
                    "losses": result["losses"], "resumed_from": result["resumed_from"], "kept_heads": heads,
                    "selection": selection, "state_size": state, "k": k, "lr": run["lr"], "ranks": world.size,
                    "sharding": mode, "attempts": result.get("attempts", []),
                    "seconds": time.time() - start}, tmp / "distill.json")
    shutil.rmtree(ckpt, ignore_errors=True)  # the output holds the student now
    return result


def save_student(student, folder, full: dict | None = None) -> None:
    """The student as an ordinary checkpoint (``save_pretrained``) in ``folder``. A sharded student's
    whole weights ``full`` (:func:`gna.hybrid.sharding.full_state_dict`) go into an unsharded model
    of its class, built on the meta device so that only ``full`` takes memory."""
    if full is None:
        student.eval().save_pretrained(folder)
        return
    from torch.distributed.fsdp import FSDPModule

    cls = next(c for c in type(student).__mro__[1:] if c is not FSDPModule and not issubclass(c, FSDPModule))
    with torch.device("meta"):
        plain = cls(student.config)
    plain.load_state_dict(full, assign=True)
    plain.tie_weights()
    plain.eval().save_pretrained(folder)


def main(args_file: str) -> None:
    """One rank of a stage started by torchrun / srun: :func:`distill_stage_job` in the process group."""
    kwargs = json.loads(open(args_file).read())
    with process_group() as world:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO if world.main else logging.WARNING, force=True,
                            format=f"%(asctime)s rank{world.rank} %(name)s %(levelname)s %(message)s")
        log.info("rank %d of %d (pid %d)", world.rank, world.size, os.getpid())
        distill_stage_job(**kwargs)


if __name__ == "__main__":
    main(sys.argv[1])
