"""The plan's section on the distillation's ranks: memory per rank, the one number the cluster
profile's ``mem_mb``, the presets' comments and the manual cite for it, and what a student that
does not fit one GPU per rank would take."""
from __future__ import annotations

DISTILL_RULES = ("distill_matrices", "distill_stage")


def rank_lines(rows, hw, world: tuple[int, int], cpus_per_rank: int) -> list[str]:
    """Markdown lines: per distillation rule, its world (GPUs per node x nodes), the peak GPU memory
    and host memory of one rank, the CPUs asked per rank, and whether a rank fits its GPU."""
    gpus, nodes = world
    worst = {}
    for r in rows:
        if r.rule in DISTILL_RULES and r.gpu and (r.rule not in worst or r.gpu_gb > worst[r.rule].gpu_gb):
            worst[r.rule] = r
    if not worst:
        return []
    lines = ["", "## Distillation: memory per rank", "",
             f"Every stage job runs on {gpus} GPU(s) x {nodes} node(s) = {gpus * nodes} data-parallel rank(s) "
             f"(`hybrid_distillation.gpus_per_stage` x `nodes`), {cpus_per_rank} CPU cores each "
             "(`cpus_per_rank`). Each rank holds the whole teacher, student, its gradients and AdamW state "
             "(gna.hybrid.distributed), so its memory does not shrink with more ranks; the host memory is "
             "what a rank loads before moving the models to its GPU, and a node's `mem_mb` in profiles/slurm "
             "must hold its ranks' (x 1.15).", "",
             "| rule | peak GPU GB per rank | host GB per rank | host GB per node | fits one GPU per rank |",
             "|---|---|---|---|---|"]
    notes = []
    for rule, r in sorted(worst.items()):
        fits = r.gpu_gb <= hw.gpu_mem_gb
        lines.append(f"| {rule} | {r.gpu_gb:.1f} | {r.host_gb / gpus:.1f} | {r.host_gb:.1f} | "
                     f"{'yes' if fits else f'**no** (> {hw.gpu_mem_gb:.0f} GB)'} |")
        if not fits:
            notes.append(f"- {rule}[{r.wildcards}]: {r.gpu_gb:.1f} GB per rank does not fit one "
                         f"{hw.gpu_mem_gb:.0f} GB GPU. More ranks do not help: data parallelism copies the "
                         "student's weights, gradients and AdamW state (~16-18 bytes per parameter: ~160 GB "
                         "for an 8B student) onto every rank. It would take sharded training (FSDP or "
                         "ZeRO-3: those states split over the ranks), which this pipeline does not build, "
                         "or a smaller student (a smaller teacher, or fewer kept heads).")
    return lines + ([""] + notes if notes else [])
