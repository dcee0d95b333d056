"""Resource plan of a study before launch: per job of its DAG, peak GPU memory, host memory and
GPU hours, estimated from the models' real shapes (data/architectures) and the jobs' batch and
token counts; checked against the SLURM profile. ``snakemake plan`` writes results/plan/."""
from .estimate import Hardware, ModelInfo, eval_tasks, forward_peak_bytes, head_scan, lm_eval_tasks, model_info, \
    student_info, training_step
from .jobs import RESUMABLE, PlanError, Row, check_profile, dag_jobs, gpu_rules, limits, parse_dry_run, plan, read_profile, \
    summary, write

__all__ = ["Hardware", "ModelInfo", "PlanError", "RESUMABLE", "Row", "check_profile", "dag_jobs", "eval_tasks",
           "forward_peak_bytes", "gpu_rules", "head_scan", "limits", "lm_eval_tasks", "model_info", "plan",
           "read_profile", "student_info", "summary", "training_step", "write"]
