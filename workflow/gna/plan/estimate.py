"""Per-job estimates of peak GPU memory, host memory and GPU time, from a model's real shape
(its config.json on the meta device: parameters, layers, heads, hidden, vocab), the job's batch
settings and token counts. Simple throughput constants (:class:`Hardware`, an H100 by default)
turn FLOPs into seconds; every constant is a documented field, overridable from a YAML mapping.

The memory model (bf16 unless the study's dtype says otherwise):
  inference = weights + live activations of one forward (rows x tokens x the widest layer
              tensor x ``act_factor``) + logits kept (rows x positions x vocab, twice: logits and
              their log-softmax) + CUDA context / allocator slack (``gpu_overhead_gb``)
  training  = frozen teacher weights + student x ``train_bytes_per_param`` (weights, grads,
              AdamW's two moments) + saved activations of one micro-batch (``train_act_per_layer``
              x tokens x hidden per layer) + the SSD scan's chunk tensors + the chunked logit loss
Validated against torch.profiler measurements on tiny models (tests/test_plan.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

import yaml

from .model_shapes import ModelInfo, model_info, student_info  # noqa: F401  estimates take these shapes

GB = 1e9
TOKENIZE_RATE = 4e5
"""Tokens per second that rule distill_tokens streams, tokenizes and packs: measured 4.4e5 on this
machine's CPU with one tokenizer thread (benchmarks/tokenize_rate.py: a 32k byte-level BPE over
local documents). The job's threads speed the tokenizer, not the packing; the download is not in it."""
TASKS_FILE = Path(__file__).with_name("lm_eval_tasks.yaml")


@dataclass(frozen=True)
class Hardware:
    """Throughput and memory constants (an H100 SXM 80 GB running HF transformers in bf16)."""
    gpu_mem_gb: float = 80.0
    fwd_tflops: float = 350.0
    """Achieved bf16 TFLOP/s of a large no-grad forward (35% of the 989 dense peak)."""
    train_tflops: float = 250.0
    """Achieved bf16 TFLOP/s of forward + backward in training (25% of peak)."""
    ssm_efficiency: float = 0.8
    """FLOP-rate factor of SSM families (Mamba-2, Llamba, Zamba2, hybrids) with fused kernels."""
    mamba1_efficiency: float = 0.5
    """Falcon-Mamba's selective scan (one state per channel) is memory-bound: half the rate."""
    bandwidth_gbs: float = 2500.0
    """Achieved HBM GB/s (of 3350): one decode step reads every weight once."""
    decode_overhead_per_layer_s: float = 0.0006
    """Kernel launches and Python per layer and decode step (HF generate, no CUDA graphs)."""
    load_gbs: float = 0.5
    """Checkpoint read (shared filesystem / HF cache) to GPU, GB/s."""
    job_overhead_s: float = 120.0
    """Interpreter, imports, CUDA context: per job."""
    task_setup_s: float = 60.0
    """lm-eval task building (datasets from the cache, prompts): per task."""
    padding_waste: float = 1.25
    """Padded tokens per real token in length-sorted batches."""
    probe_padding_waste: float = 1.04
    """Padded tokens per real token in a KV probe's batches (prompts of near-equal length: 1.04
    measured on 32-prompt batches of the paper-format probe at 20 pairs with Llama-3's tokenizer)."""
    cpu_gflops: float = 70.0
    """Achieved float32 GFLOP/s of the exact head scan on one CPU core, per CPU second (the plan's CPU
    rows, gna.plan.scan_methods): measured 70 on SmolLM2-135M-Instruct, paper-format prompts, one torch
    thread, 0.84 of a plain matmul of the scan's shapes in the same process (83 GFLOP/s; the 2-core
    development machine, ``benchmarks/scan_cpu_real.py``; FLOPs as torch's FlopCounterMode counts
    them, which the plan's ``head_scan`` count matches within 5%: tests/test_scan_cpu.py)."""
    cpu_gflops_bf16: float = 140.0
    """The same in bfloat16, a study's ``dtype: bfloat16`` on a CPU with bf16 matrix units (this
    machine's): 2.0x the float32 rate, the middle of the forward passes measured both ways in one run
    (8 rows x 120 tokens: SmolLM2-135M 1.9x, Qwen2.5-Coder-1.5B 2.15x; 91 MMLU letter questions on
    Qwen cut to 6 layers 2.36x; the packed exact scan of SmolLM2's last 4 layers on 3 prompts 1.49x,
    ``benchmarks/packed_rows.py``)."""
    light_work_s: float = 180.0
    """A job that loads models and reads a few prompts (heatmaps, patterns): its work besides the load."""
    cpu_job_overhead_s: float = 10.0
    """A CPU job's start-up, in place of ``job_overhead_s`` (no CUDA context, no shared filesystem):
    Snakemake's script wrapper and the imports of torch, transformers and lm-eval (4.3 s measured)."""
    cpu_task_setup_s: float = 1.0
    """lm-eval task building on a CPU from local files, in place of ``task_setup_s``: 0.3 s measured
    for the 91-question local MMLU tasks (their contexts built in the job's log)."""
    cpu_bandwidth_gbs: float = 8.24
    """A decode step's read of the weights on one CPU core, fitted (gna.plan.cpu_generation)."""
    cpu_load_gbs: float = 1.0
    """Checkpoint read from a local disk, in place of ``load_gbs`` (Qwen2.5-Coder-1.5B's 3.4 GB in 1.9 s
    from the page cache; a cold read is slower)."""
    atp_forward_multiple: float = 2.5
    """Cost of AtP's forward + backward per prompt, in forwards of the same prompt (1.7-2.9 measured on
    Llama-3.2-3B / 3.1-8B slices in bf16 on a CPU; ``benchmarks/scan_real_width.py --methods atp``
    prints it as ``after_in_forwards``; GradDrop adds one backward, ~1.5 forwards, per layer)."""
    pytorch_ssm_memory_factor: float = 3.5
    """Activation memory of an SSM layer on the pure-PyTorch scan over the fused kernels' (one Llamba
    layer at 256 rows: 10.3 GB against 2.9 GB); a job refuses that path on a GPU unless
    GNA_FUSED_KERNELS=0 (gna.models.ssm_kernels)."""
    pytorch_ssm_time_factor: float = 5.0
    """Time of an SSM forward on the pure-PyTorch scan over the fused kernels' (a floor: the chunked
    scan's materialised tensors and many small kernels; not measured here, no GPU)."""
    act_factor: float = 4.0
    """Live copies of the widest activation in a no-grad forward (residual, normed, MLP halves)."""
    train_bytes_per_param: float = 18.0
    """Student training state per parameter: fp32 master weights, grads and AdamW's two moments (16),
    plus autocast's bf16 copy of the weights during a step (2; gna.hybrid.precision)."""
    train_act_per_layer: float = 34.0
    """Saved activation bytes per token per hidden unit per layer (Korthikanti et al. 2022, bf16,
    flash/SSM mixer: no T^2 term)."""
    gpu_overhead_gb: float = 2.0
    """CUDA context, cuBLAS workspaces, allocator fragmentation."""
    host_base_gb: float = 6.0
    """Host memory besides the weights: Python, torch, lm-eval datasets, tokenizers."""
    host_weight_factor: float = 1.2
    """Host copies of the weights while loading on the CPU first (1.2 x their bf16 bytes)."""
    allreduce_gbs: float = 150.0
    """Achieved NCCL all-reduce bus bandwidth among the GPUs of one node, GB/s (NVLink; nccl-tests
    measure ~360 on 8 H100 SXM at large sizes: a conservative share of it)."""
    internode_gbs: float = 20.0
    """The same across nodes (one 200 Gb/s InfiniBand link per node: 25 GB/s)."""

    @classmethod
    def from_dict(cls, d: dict | None) -> "Hardware":
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown plan hardware constant(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)


@lru_cache(maxsize=1)
def lm_eval_tasks() -> dict:
    return yaml.safe_load(TASKS_FILE.read_text())


def task_size(task: str, limit: int | None = None) -> dict:
    """The shape of ``task`` (a task built from pinned files, ``<task>_local``, has its lm-eval task's)."""
    known = lm_eval_tasks()
    t = dict(known.get(task) or known.get(task.removesuffix("_local")) or known["_default"])
    if limit:
        t["docs"] = min(t["docs"], int(limit))
    return t


# -- the estimates -----------------------------------------------------------------------------

@dataclass
class Estimate:
    gpu_gb: float = 0.0
    host_gb: float = 0.0
    hours: float = 0.0
    gpu: bool = True
    resumable: bool = False
    notes: list = field(default_factory=list)
    gpus: int = 1
    """GPUs of the job (``hours`` is its wall time on them)."""
    sharding: str = ""
    replicated_gb: float = 0.0
    sharded_gb: float = 0.0
    """A distillation stage's mode and its peak GPU GB per rank either way (gna.plan.jobs._training)."""


def rate(hw: Hardware, info: ModelInfo, training: bool = False) -> float:
    base = (hw.train_tflops if training else hw.fwd_tflops) * 1e12
    if info.family == "mamba1":
        return base * hw.mamba1_efficiency
    return base if info.family == "attention" else base * hw.ssm_efficiency


def forward_peak_bytes(hw: Hardware, info: ModelInfo, rows: int, tokens: int, logit_positions: int | None = None,
                       weights: bool = True, overhead: bool = True) -> float:
    """Peak bytes of one no-grad forward of ``rows`` x ``tokens`` (logits kept at
    ``logit_positions`` per row, default every position; 0 when only the last is computed)."""
    b = info.dtype_bytes
    act = hw.act_factor * rows * tokens * info.widest() * b
    ssm = max([rows * h * 2 * d * st * 4 for (_, h, d, st) in info.ssm] or [0])  # fp32 state per mixer
    pos = tokens if logit_positions is None else logit_positions
    logits = 2 * rows * pos * info.vocab * b
    return ((info.weight_bytes if weights else 0) + act + ssm + logits
            + (hw.gpu_overhead_gb * GB if overhead else 0))


def kv_cache_bytes(info: ModelInfo, rows: int, tokens: int) -> float:
    return sum(2 * rows * tokens * kv * hd * info.dtype_bytes for (_, _, hd, kv) in info.attention)


def eval_tasks(hw: Hardware, info: ModelInfo, tasks, eval_cfg: dict, layers: float | None = None,
               repeats: int = 1) -> tuple[float, float]:
    """(seconds, peak bytes) of lm-eval ``tasks`` on the model (``layers`` kept), ``repeats`` times;
    ``eval_cfg``: the study's validated ``eval`` settings (every key, the schema's defaults filled in), and
    ``task_limits``: the documents a local task holds, by task (its sample)."""
    B = int(eval_cfg["batch_size"])
    max_len = eval_cfg["max_length"]   # None: the model's own limit, which no task here reaches
    limit, local = eval_cfg["limit"], eval_cfg.get("task_limits") or {}
    r = rate(hw, info)
    secs, peak = 0.0, 0.0
    for task in tasks:
        # a local task holds its sample (gna.plan.jobs.local_task_docs); eval.limit cuts any task further
        t = task_size(task, min((n for n in (limit, local.get(task)) if n), default=None))
        secs += hw.task_setup_s
        longest = t["max_tokens"] if max_len is None else min(t["max_tokens"], int(max_len))
        if t["output"] == "loglikelihood" and eval_cfg.get("shared_prefix") and info.family == "attention":
            # gna.evaluation.shared_prefix: the context once without logits (but its last position),
            # then every choice's continuation with logits
            cont = t["docs"] * t.get("choices", 1) * t.get("cont_tokens", 1)
            body = t["docs"] * t["ctx_tokens"] * info.flops_per_token(t["ctx_tokens"], layers, logits=False)
            secs += repeats * (body + (cont + t["docs"]) * info.flops_per_token(t["ctx_tokens"], layers)) / r
            peak = max(peak, forward_peak_bytes(hw, info, B, longest))
        elif t["output"] == "loglikelihood":
            fwd = t["docs"] * (1 if t.get("shared") else t.get("choices", 1))
            tokens = fwd * (t["ctx_tokens"] + t.get("cont_tokens", 1)) * hw.padding_waste
            secs += repeats * tokens * info.flops_per_token(t["ctx_tokens"], layers) / r
            peak = max(peak, forward_peak_bytes(hw, info, B, longest))
        else:  # generate_until: prefill, then gen_tokens decode steps per batch
            g = generation_parts(hw, info, t, B, layers)
            secs += repeats * (g["prefill_s"] + g["steps"] * decode_step_s(hw, g))
            peak = max(peak, forward_peak_bytes(hw, info, B, longest, logit_positions=1)
                       + kv_cache_bytes(info, B, longest + t["gen_tokens"]) * g["layers"] / info.n_layers)
    return secs, peak


def generation_parts(hw: Hardware, info: ModelInfo, t: dict, batch_size: int, layers: float | None = None) -> dict:
    """A generation task ``t``'s parts: ``prefill_s``, decode ``steps`` (batches x ``gen_tokens``: the
    whole budget), per step the kept layers' ``weight_bytes``, the batch's ``flops_s`` and ``layers``."""
    r, L, ctx = rate(hw, info), info.n_layers if layers is None else layers, t["ctx_tokens"]
    prefill = t["docs"] * ctx * hw.padding_waste * info.flops_per_token(ctx, layers, logits=False) / r
    return {"prefill_s": prefill, "steps": math.ceil(t["docs"] / batch_size) * t["gen_tokens"],
            "weight_bytes": info.weight_bytes * L / info.n_layers, "layers": L,
            "flops_s": batch_size * info.flops_per_token(ctx + t["gen_tokens"] / 2, layers) / r}


def decode_step_s(hw: Hardware, parts: dict) -> float:
    """A step: the kept weights read once or the batch's FLOPs, the longer, plus a per-layer overhead."""
    return max(parts["weight_bytes"] / (hw.bandwidth_gbs * GB), parts["flops_s"]) \
        + hw.decode_overhead_per_layer_s * parts["layers"]


def guard_draws(guard_sample: int, guard_level: float | None) -> int:
    """Heads the atp+exact guard ablates when none beats its bar: ``guard_sample``, or with a
    ``guard_level`` enough that the one-sided 95% bound on the share that would is at most the level
    (gna.scan.attribution_ranking; more when some do)."""
    if guard_level is None:
        return guard_sample
    return max(guard_sample, math.ceil(math.log(0.05) / math.log(1 - guard_level)))


SCORED_POSITIONS = 2
"""Scored positions per probe row: one per one-token choice, two where the tokenizer splits " 42"
into " " and "42" (Llama-3) and the shared " " is scored too (gna.probes.scoring)."""


def head_scan(hw: Hardware, info: ModelInfo, n_examples: int, n_pairs: int, batch_size: int = 32,
              max_rows: int = 256, classify_top: int = 10, classify_examples: int = 20,
              kinds=None, tokens: int | None = None, method: str = "exact", candidates: int = 16,
              guard_sample: int = 8, graddrop: bool = False) -> tuple[float, float]:
    """(seconds, peak bytes) of gna.scan.scan / gna.scan.attribution_ranking, term by term as the code computes:

    - baseline: one forward per prompt, the LM head at each row's scored positions only (gathered
      before the head, float32: gna.probes.scoring.ScoredHead);
    - exact rows: per batch, the residual entering every layer from one forward (``captured``), then
      per head ablated one row per prompt through the layers from the head's own on, and the LM head
      at that row's scored positions (``SCORED_POSITIONS``), ``max_rows`` rows per forward;
    - atp / atp+exact: AtP's forward + backward, ``atp_forward_multiple`` forwards per prompt (GradDrop:
      one more backward per layer), then the exact rows of ``candidates`` + ``guard_sample`` heads only,
      taken as spread over the layers as all heads are;
    - the G&A classification of the top heads (eager attention, one forward per head and example).
    Padding: ``probe_padding_waste``. Peak: the larger of the exact rows' forward and AtP's backward,
    each with the float32 copy of a low-precision head and its gathered logits."""
    T = tokens or probe_tokens(n_pairs)
    Tp = T * hw.probe_padding_waste
    r = rate(hw, info)
    body = info.flops_per_token(T, logits=False)
    per_layer = body / info.n_layers
    head = 2.0 * info.hidden * info.vocab * SCORED_POSITIONS   # one row's LM head, gathered
    n_heads = sum(h for (_, kind, h) in info.heads_by_layer if not kinds or kind in kinds)
    share = {"exact": 1.0, "atp": 0.0}.get(method, min(1.0, (candidates + guard_sample) / max(1, n_heads)))
    flops = n_examples * (Tp * body + head)  # the baseline
    if share:
        flops += n_examples * Tp * body  # the captured residuals
        for (layer, kind, h) in info.heads_by_layer:
            if not kinds or kind in kinds:
                flops += share * h * n_examples * (Tp * (info.n_layers - layer) * per_layer + head)
    if method != "exact":
        multiple = hw.atp_forward_multiple + (1.5 * info.n_layers if graddrop else 0.0)
        flops += multiple * n_examples * (Tp * body + head)
    secs = flops / r
    # classification: eager attention / pattern reads, one forward per head and example
    secs += classify_top * classify_examples * T * info.flops_per_token(T) / (r * 0.2)
    rows = max(batch_size, (max_rows // batch_size) * batch_size)
    logits = 2 * SCORED_POSITIONS * info.vocab * 4.0        # per row: fp32 logits and their log-softmax
    peak = (forward_peak_bytes(hw, info, rows, T, logit_positions=0) + fp32_head_bytes(info) + rows * logits
            + info.hidden * rows * T * info.dtype_bytes  # a layer's captured residual repeated per ablation
            + info.hidden * batch_size * T * info.dtype_bytes * info.n_layers)  # every layer's, one batch
    if method != "exact":  # the backward keeps a batch's activations, as training does (no optimizer state)
        peak = max(peak, forward_peak_bytes(hw, info, batch_size, T, logit_positions=0) + fp32_head_bytes(info)
                   + batch_size * logits * 1.5
                   + hw.train_act_per_layer * batch_size * T * info.hidden * info.n_layers)
    att = info.attention[0] if info.attention else None
    if att and classify_top:  # eager attention for the patterns: heads x T^2 per example (fp32)
        peak = max(peak, forward_peak_bytes(hw, info, classify_examples, T) + att[1] * T * T * 4 * classify_examples)
    return secs, peak


def fp32_head_bytes(info: ModelInfo) -> float:
    """gna.probes.scoring.fp32_logits: the float32 copy of a low-precision LM head's weight."""
    return info.vocab * info.hidden * 4.0 if info.dtype_bytes < 4 else 0.0


def heldout_perplexity(hw: Hardware, info: ModelInfo, rows: int, tokens: int,
                       positions_per_chunk: int = 1024) -> float:
    """Peak bytes of gna.hybrid.study.data.heldout_perplexity on a rows x tokens batch: one
    forward whose head projects the last position only, the head's input kept (rows x tokens x
    hidden), then per chunk of positions the head's float32 output (gna.probes.scoring.fp32_logits
    computes it from float32 weights, once) and its log-softmax (float32)."""
    chunk = min(positions_per_chunk, rows * tokens)
    per_logit = 4 + 4
    return (forward_peak_bytes(hw, info, rows, tokens, logit_positions=1)
            + rows * tokens * info.hidden * info.dtype_bytes
            + chunk * info.vocab * per_logit + fp32_head_bytes(info))


def probe_tokens(n_pairs: int) -> int:
    """Tokens of a paper-format KV probe prompt: header and query ~20, ~6 per 'word:42' line."""
    return 20 + 6 * int(n_pairs)


def probe_scoring(hw: Hardware, info: ModelInfo, n_examples: int, n_pairs_list, batch_size: int = 32,
                  layers: float | None = None, repeats: int = 1) -> tuple[float, float]:
    r = rate(hw, info)
    secs, peak = 0.0, 0.0
    for n in n_pairs_list:
        T = probe_tokens(n)
        secs += repeats * n_examples * T * hw.padding_waste * info.flops_per_token(T, layers) / r
        peak = max(peak, forward_peak_bytes(hw, info, batch_size, T) + fp32_head_bytes(info))
    return secs, peak


def training_step(hw: Hardware, student: ModelInfo, teacher: ModelInfo, micro_batch: int, seq_len: int,
                  stage: int, vocab_chunk: int = 4096, chunk_size: int = 128, shards: int = 1,
                  accumulate: bool = False, checkpoint: bool = False) -> tuple[float, float]:
    """(FLOPs per token, peak bytes) of one distillation micro-step (gna.hybrid.distillation).
    Stage 1 aligns each mixer's matrix with the teacher's attention matrix, one layer's targets at a
    time; stage 2 each layer's output; stage 3 the logits (chunked loss, ``vocab_chunk`` tokens).

    ``shards`` > 1: the student sharded over that many ranks (gna.hybrid.sharding, FSDP2): its fp32
    masters, gradients and AdamW moments split over them, plus the bf16 copies of the unit that
    computes and of the one gathered ahead of it (a block, or the LM head), plus, with
    ``accumulate`` (several micro-batches per step), the unsharded fp32 gradients held between
    reductions (every parameter's: an upper bound, stages 1-2 train fewer); ``checkpoint``: stage 3
    keeps each block's input only and recomputes one block at a time (one more student forward).
    The teacher stays whole on every rank."""
    tok = micro_batch * seq_len
    d = student.hidden
    teacher_fwd = teacher.flops_per_token(seq_len / 2, logits=stage == 3)
    student_fwd = student.flops_per_token(seq_len / 2, logits=stage == 3)
    flops = teacher_fwd + 3 * student_fwd
    if stage == 1:  # both T x T matrices per layer and head, forward and backward of the student's
        h, hd = teacher.attention[0][1], teacher.attention[0][2]
        flops += teacher.n_layers * 4 * h * hd * seq_len * 2
    weights = teacher.weight_bytes + student.params * hw.train_bytes_per_param
    acts = hw.train_act_per_layer * tok * d * student.n_layers
    if shards > 1:  # the bf16 copy autocast makes (2 of train_bytes_per_param) is the gathered units here
        unit = max(student.params / max(student.n_layers, 1), student.vocab * d)
        weights = (teacher.weight_bytes + student.params * (hw.train_bytes_per_param - 2) / shards + 2 * 2 * unit
                   + (4 * student.params if accumulate else 0))
    if checkpoint and stage == 3:
        acts = 2 * tok * d * student.n_layers + hw.train_act_per_layer * tok * d
        flops += student_fwd
    ssd = max([4 * micro_batch * h * seq_len * chunk_size * 4 for (_, h, _, _) in student.ssm] or [0])
    extra = 0.0
    if stage == 1:
        h = teacher.attention[0][1]
        # ~12 (heads, T, T) fp32 matrices per sequence alive while one layer is aligned: teacher
        # attention and its fp32 copy, the student's matrix and its autograd intermediates
        # (measured on the CPU at T = 512 with gna.hybrid.distillation; paper.yaml's comment)
        extra = 12 * micro_batch * h * seq_len * seq_len * 4
    elif stage == 3:
        extra = 3 * min(vocab_chunk, tok) * student.vocab * 4  # student, teacher logits, grad (fp32)
    teacher_act = hw.act_factor * tok * teacher.widest() * teacher.dtype_bytes
    return flops, weights + acts + ssd + extra + teacher_act + hw.gpu_overhead_gb * GB


def allreduce_seconds(hw: Hardware, nbytes: float, gpus: int, nodes: int) -> float:
    """One ring all-reduce of ``nbytes`` among ``gpus`` x ``nodes`` ranks: each rank sends and
    receives 2 (W - 1) / W of it, at the slowest link's bandwidth."""
    world = gpus * nodes
    if world == 1:
        return 0.0
    return 2 * (world - 1) / world * nbytes / ((hw.allreduce_gbs if nodes == 1 else hw.internode_gbs) * GB)


def host_gb(hw: Hardware, *infos: ModelInfo) -> float:
    """Host memory of a job that loads ``infos`` on the CPU first, then moves them to the GPU."""
    return hw.host_base_gb + hw.host_weight_factor * sum(i.weight_bytes for i in infos) / GB


def load_seconds(hw: Hardware, *infos: ModelInfo) -> float:
    return hw.job_overhead_s + sum(i.weight_bytes for i in infos) / (hw.load_gbs * GB)


def loaded(hw: Hardware, info: ModelInfo, secs: float, peak: float) -> Estimate:
    """A job of one model loaded: ``secs`` of work at ``peak`` bytes of GPU memory, plus the load."""
    return Estimate(gpu_gb=peak / GB, host_gb=host_gb(hw, info), hours=(secs + load_seconds(hw, info)) / 3600)
