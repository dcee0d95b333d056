# SSM masking (slides, section 5): the SSM's top G&A heads masked on MMLU-format prompts
# (gna.experiments.masking). Reads config["experiments"]:
#   ssm_masking.models       SSM models (Mamba-2, Zamba2's Mamba-2 layers, Llamba) whose top G&A heads are masked
#   ssm_masking.modes        none | full | pattern (default: all three)
#   ssm_masking.tasks        multiple-choice tasks scored (default: mmlu + the knowledge tasks whose
#                            choices share one prompt; Winogrande-style tasks cannot be masked)
#   ssm_masking.limit        documents per task (default: eval.limit)
#   ssm_masking.batch_size   rows per forward (default: eval.batch_size)


MASKING = experiment_config("ssm_masking")
MASKING_MODES = MASKING["modes"] if MASKING else []
# a masking mode's per-question answers (gna.evaluation.items), which the findings pair
MASKING_ANSWERS = "results/masking/{model}/{mode}.answers.csv"
# lm-eval tasks whose choices have different contexts: no shared prompt to segment and mask.
PER_CHOICE_CONTEXT = {"micro_knowledge_fill", "winogrande"}
MASKING_TASKS = MASKING.get("tasks") or [t for t in tasks_of("mmlu", "knowledge") if t not in PER_CHOICE_CONTEXT]


rule export_mc_task:
    input:
        lambda wc: [f"{MICRO_DATA}/{wc.task}.jsonl"] if MICRO_DATA else [],
    output:
        "results/tasks/{task}.examples.jsonl",
    params:
        micro_data=MICRO_DATA,
        limit=MASKING.get("limit", EVAL["limit"]),
    log:
        "logs/tasks/{task}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/export_mc_task.py"


rule ssm_masking:
    input:
        model=lambda wc: model_input(wc.model),
        ga="results/scan/{model}.ga.csv",
        tasks=expand("results/tasks/{task}.examples.jsonl", task=MASKING_TASKS),
    output:
        "results/masking/{model}/{mode}.csv",
        answers=MASKING_ANSWERS,
    wildcard_constraints:
        mode="none|full|pattern",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=MASKING_TASKS,
        batch_size=MASKING.get("batch_size", EVAL["batch_size"]),
        named=lambda wc: MASKING.get("named_heads", {}).get(wc.model),
        fields=lambda wc: result_fields(wc.model, "ssm_masking"),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/masking/{model}/{mode}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/ssm_masking.py"


rule ssm_masking_figure:
    input:
        expand("results/masking/{model}/{mode}.csv", model=experiment_models("ssm_masking"), mode=MASKING_MODES),
    output:
        png=report(f"{FIGURES}/ssm_masking.png", caption="../report/ssm_masking.rst", category="Masking"),
        pdf=f"{FIGURES}/ssm_masking.pdf",
        csv=f"{FIGURES}/ssm_masking.csv",
        md=f"{FIGURES}/ssm_masking.md",
    params:
        mmlu=tasks_of("mmlu"),
    log:
        "logs/figures/ssm_masking.log",
    conda:
        CPU_ENV
    script:
        "../scripts/ssm_masking_figure.py"


EXPERIMENT_REGISTRY.declare(
    "ssm_masking",
    targets=lambda: [f"{FIGURES}/ssm_masking.png", f"{FIGURES}/ssm_masking.md",
                     *expand(MASKING_ANSWERS, model=experiment_models("ssm_masking"), mode=MASKING_MODES)],
    batched={"ssm_masking": lambda wc: (), "export_mc_task": lambda wc: ()},
    plan={"ssm_masking": Estimator("gna.plan.job_estimates:masked_mixers", experiment="ssm_masking")},
    findings=[Section(50, "gna.report.findings.ssm_masking:ssm_masking",
                      {"answers": MASKING_ANSWERS, "tasks": {"mmlu": tasks_of("mmlu")}})],
)
