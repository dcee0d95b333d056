"""The plan's distillation stages on their ranks: the estimate of one stage job (replicated or
sharded, and which of the two ``hybrid_distillation.sharding: auto`` picks), its communication per
optimizer step, and the plan's section on memory per rank, the one number the cluster profile's
``mem_mb``, the presets' comments and the manual cite for it."""
from __future__ import annotations

import math

from ..errors import ConfigError
from ..hybrid.study.data import stage_data
from . import estimate as E
from .estimate import GB, Estimate

DISTILL_RULES = ("distill_matrices", "distill_stage")
BUCKET_ELEMENTS = 25 * 2**20  # gna.hybrid.distributed.BUCKET_ELEMENTS (not imported: that module needs torch)
SHARDING_MODES = ("auto", "replicated", "sharded")


def choose_sharding(mode: str | None, replicated_gb: float, sharded_gb: float, hw, world: tuple[int, int],
                    where: str) -> bool:
    """Whether a stage shards its student: ``mode`` "sharded" / "replicated" as said; "auto" (None):
    sharded when a replicated rank does not fit one GPU (``hw.gpu_mem_gb``) and a node has more than
    one GPU to shard over. Raises :class:`gna.errors.ConfigError` (one line: the job, the GB, what to change)
    for a student that does not fit even sharded, and for "sharded" on one GPU per node."""
    gpus, nodes = world
    mode = mode or "auto"
    if mode not in SHARDING_MODES:
        raise ConfigError(f"hybrid_distillation.sharding={mode!r} is not one of {', '.join(SHARDING_MODES)}")
    if mode == "replicated":
        return False
    if gpus == 1:
        if mode == "sharded":
            raise ConfigError("hybrid_distillation.sharding: sharded needs gpus_per_stage > 1 (the student is "
                                "sharded over the GPUs of a node, replicated across nodes)")
        return False
    if mode == "auto" and replicated_gb <= hw.gpu_mem_gb:
        return False
    if sharded_gb > hw.gpu_mem_gb:
        raise ConfigError(
            f"{where}: {sharded_gb:.1f} GB per rank even sharded over {gpus} GPUs ({replicated_gb:.1f} GB replicated) "
            f"> {hw.gpu_mem_gb:.0f} GB: lower hybrid_distillation.micro_batch_size, raise gpus_per_stage, or "
            "distil a smaller teacher")
    return True


def step_communication(hw, params: int, world: tuple[int, int], sharded: bool, micro: int,
                       every: bool = False) -> float:
    """Seconds of collectives per optimizer step. Replicated: one all-reduce of the fp32 gradients.
    Sharded over a node's G ranks: every micro-batch all-gathers the bf16 weights twice (forward,
    and again in backward: each unit is freed after its forward), a reduce-scatter of the fp32
    gradients (one, or per micro-batch with ``every``), and across nodes an all-reduce of each
    rank's gradient shard (as often)."""
    gpus, nodes = world
    if not sharded:
        return E.allreduce_seconds(hw, params * 4, gpus, nodes)
    reductions = micro if every else 1
    secs = (2 * micro * 2 * params + reductions * 4 * params) * (gpus - 1) / gpus / (hw.allreduce_gbs * GB)
    return secs + reductions * (E.allreduce_seconds(hw, params * 4 / gpus, 1, nodes) if nodes > 1 else 0.0)


def training_estimate(s, teacher: str, d: dict, stage: int, k: int, state: int, world=(1, 1)) -> Estimate:
    """A distillation stage on ``world`` = (GPUs per node, nodes) ranks (``s``: gna.plan.jobs.Study),
    replicated (each rank holds the whole student and its AdamW state; gna.hybrid.distributed) or
    sharded (gna.hybrid.sharding) as ``hybrid_distillation.sharding`` says (``auto``:
    :func:`choose_sharding`); each rank goes through its share of every batch in micro-batches.
    Memory is per rank; ``hours`` the job's wall time, ``gpus`` its GPUs."""
    t = s.info(teacher)
    st = E.student_info(t, k, state)
    data = stage_data(d.get("data"), stage)  # the stage's batch (by_stage: mohawk's 64 in stage 1, 128 after)
    batch = int(data.get("batch_size", 8))
    seq = int(data.get("seq_len", 2048 if data.get("source") == "web" else 128))
    # the paper-scale defaults assumed where the config leaves them out (micro-batches of 4
    # sequences with gradient accumulation, stage 3's logit loss in chunks of 4096 tokens)
    mb = int(d.get("micro_batch_size") or min(4, batch))
    steps = (d.get("steps") or [None] * 3)[stage - 1]
    tokens = float(steps) * batch * seq if steps else float((d.get("tokens") or [0] * 3)[stage - 1] or 0)
    gpus, nodes = world
    shape = dict(vocab_chunk=int(d.get("vocab_chunk") or 4096), chunk_size=int(d["chunk_size"]))
    flops, peak = E.training_step(s.hw, st, t, mb, seq, stage, **shape)
    if gpus * nodes > 1:
        peak += min(st.params, BUCKET_ELEMENTS) * 4  # the flat all-reduce bucket
    micro = math.ceil(batch / (gpus * nodes) / mb)
    every = d.get("gradient_sync") == "every_micro_batch"
    sflops, speak = E.training_step(s.hw, st, t, mb, seq, stage, **shape, shards=gpus,
                                    accumulate=micro > 1 and not every,
                                    checkpoint=bool(d.get("activation_checkpointing", True)))
    replicated_gb = peak / GB
    where = f"{'distill_matrices' if stage == 1 else 'distill_stage'}[teacher={teacher},k={k},state={state}]"
    sharded = choose_sharding(d.get("sharding"), replicated_gb, speak / GB, s.hw, world, where)
    if sharded:
        flops, peak = sflops, speak
    secs = tokens * flops / E.rate(s.hw, st, training=True) / (gpus * nodes)
    secs += tokens / (batch * seq) * step_communication(s.hw, st.params, world, sharded, micro, every)
    host = (E.host_gb(s.hw, t) + 4.0) * gpus  # + the data stream's buffers; every rank of a node loads its copy
    return Estimate(gpu_gb=peak / GB, host_gb=host, hours=(secs + E.load_seconds(s.hw, t)) / 3600,
                    resumable=True, gpus=gpus * nodes, sharding="sharded" if sharded else "replicated",
                    replicated_gb=replicated_gb, sharded_gb=speak / GB if gpus > 1 else 0.0)


def rank_lines(rows, hw, world: tuple[int, int], cpus_per_rank: int) -> list[str]:
    """Markdown lines: per distillation rule, its world (GPUs per node x nodes), the peak GPU memory
    of one rank replicated and sharded, the mode the stage runs in, host memory, the CPUs asked per
    rank, and whether a rank fits its GPU."""
    gpus, nodes = world
    worst = {}
    for r in rows:
        if r.rule in DISTILL_RULES and r.gpu and (r.rule not in worst or r.gpu_gb > worst[r.rule].gpu_gb):
            worst[r.rule] = r
    if not worst:
        return []
    lines = ["", "## Distillation: memory per rank", "",
             f"Every stage job runs on {gpus} GPU(s) x {nodes} node(s) = {gpus * nodes} rank(s) "
             f"(`hybrid_distillation.gpus_per_stage` x `nodes`), {cpus_per_rank} CPU cores each "
             "(`cpus_per_rank`). Replicated (gna.hybrid.distributed), each rank holds the whole student, its "
             "gradients and AdamW state (~18 bytes per parameter), whatever the number of ranks; sharded "
             "(gna.hybrid.sharding, FSDP2: `hybrid_distillation.sharding`, whose `auto` shards exactly when a "
             "replicated rank does not fit its GPU) the fp32 weights, gradients and AdamW state are split over "
             "the GPUs of a node, plus the unsharded fp32 gradients held across micro-batches and the bf16 "
             "copies of the blocks being computed. The teacher stays whole on every rank. The host memory is "
             "what a rank loads before moving the models to its GPU, and a node's `mem_mb` in profiles/slurm "
             "must hold its ranks' (x 1.15).", "",
             "| rule | mode | peak GPU GB per rank | replicated | sharded | host GB per rank | host GB per node "
             "| fits one GPU per rank |",
             "|---|---|---|---|---|---|---|---|"]
    notes = []
    for rule, r in sorted(worst.items()):
        fits = r.gpu_gb <= hw.gpu_mem_gb
        sharded = f"{r.sharded_gb:.1f}" if r.sharded_gb else "(one GPU per node)"
        lines.append(f"| {rule} | {r.sharding or 'replicated'} | {r.gpu_gb:.1f} | {r.replicated_gb or r.gpu_gb:.1f} | "
                     f"{sharded} | {r.host_gb / gpus:.1f} | {r.host_gb:.1f} | "
                     f"{'yes' if fits else f'**no** (> {hw.gpu_mem_gb:.0f} GB)'} |")
        if not fits:
            notes.append(f"- {rule}[{r.wildcards}]: {r.gpu_gb:.1f} GB per rank does not fit one "
                         f"{hw.gpu_mem_gb:.0f} GB GPU replicated: data parallelism copies the student's weights, "
                         "gradients and AdamW state (~18 bytes per parameter: ~160 GB for an 8B student) onto "
                         "every rank. Set `hybrid_distillation.sharding: auto` (or `sharded`) with "
                         "`gpus_per_stage` > 1 to split them over a node's GPUs, or distil a smaller student.")
    return lines + ([""] + notes if notes else [])
