# Masking experiments: the SSM's G&A heads on MMLU-format prompts (slides, section 5) and the
# attention heads of a hybrid (Zamba2, section 5.3). Reads config["experiments"]:
#   ssm_masking.models       SSM models (Mamba-2, Zamba2's Mamba-2 layers, Llamba) whose top G&A heads are masked
#   ssm_masking.modes        none | full | pattern (default: all three)
#   ssm_masking.tasks        multiple-choice tasks scored (default: mmlu + the knowledge tasks whose
#                            choices share one prompt; Winogrande-style tasks cannot be masked)
#   ssm_masking.limit        documents per task (default: eval.limit)
#   ssm_masking.batch_size   rows per forward (default: eval.batch_size)
#   hybrid_attention.models  hybrids whose attention heads are masked (Zamba2)
#   hybrid_attention.k       top-k attention heads of the KV ranking among attention heads, or "all"
#                            (k_by_model per model); k = 0 (the unmodified model) is evaluated once
#   hybrid_attention.modes   last_row: the heads' softmax row at the answer position zeroed (the official
#                            code; "all" = every head of every invocation); ablate: the heads zeroed whole
#   row_sweep.models         models whose head sets are row-masked at one named position set of the
#                            MMLU prompt at a time (gna.experiments.row_sweep): where they aggregate
#   row_sweep.head_sets      name -> attention | ssm | [[layer, head(, kind)], ...]
#   row_sweep.position_sets  answer, option_values, option_letters, option_closers, question, all_but_answer

MASKING = experiment_config("ssm_masking")
HYBRID_ATTENTION = experiment_config("hybrid_attention")
ROW_SWEEP = experiment_config("row_sweep")
ROW_SWEEP_OUTPUTS = [f"results/row_sweep/{m}/{h}.csv" for m in experiment_models("row_sweep")
                     for h in ROW_SWEEP["head_sets"]] if ROW_SWEEP else []
MASKING_MODES = MASKING["modes"] if MASKING else []
# each condition's per-question answers (gna.evaluation.items), which the findings pair: a masking
# mode's own file; a row sweep's conditions in one file (one job), told apart by its condition column
MASKING_ANSWERS = "results/masking/{model}/{mode}.answers.csv"
ROW_SWEEP_ANSWERS = "results/row_sweep/{model}/{head_set}.answers.csv"
HYBRID_ATTENTION_ANSWERS = "results/hybrid_attention/{model}/{mode}-k{k}.answers.csv"
# lm-eval tasks whose choices have different contexts: no shared prompt to segment and mask.
PER_CHOICE_CONTEXT = {"micro_knowledge_fill", "winogrande"}


MASKING_TASKS = MASKING.get("tasks") or [t for t in tasks_of("mmlu", "knowledge") if t not in PER_CHOICE_CONTEXT]


# model -> its result files (hybrid_attention_files), in config order
HYBRID_ATTENTION_OUTPUTS = {m: hybrid_attention_files(m) for m in experiment_models("hybrid_attention")}


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


rule hybrid_attention:
    input:
        model=lambda wc: model_input(wc.model),
        ranking="results/scan/{model}.ranking.csv",
    output:
        "results/hybrid_attention/{model}/{mode}-k{k}.csv",
        answers=HYBRID_ATTENTION_ANSWERS,
    wildcard_constraints:
        mode="last_row|ablate",
        k=r"\d+|all",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu", "retrieval", "knowledge"),
        fields=lambda wc: result_fields(wc.model, "hybrid_attention"),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/hybrid_attention/{model}/{mode}-k{k}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/hybrid_attention.py"


rule hybrid_attention_table:
    input:
        [f for files in HYBRID_ATTENTION_OUTPUTS.values() for f in files],
    output:
        csv=f"{FIGURES}/hybrid_attention.csv",
        md=report(f"{FIGURES}/hybrid_attention.md", caption="../report/hybrid_attention.rst", category="Masking"),
    params:
        models=list(HYBRID_ATTENTION_OUTPUTS),
        counts=[len(f) for f in HYBRID_ATTENTION_OUTPUTS.values()],
        roles=task_roles("topk"),
        paper_keys=paper_keys(HYBRID_ATTENTION_OUTPUTS),
    log:
        "logs/figures/hybrid_attention.log",
    conda:
        CPU_ENV
    script:
        "../scripts/hybrid_attention_table.py"


rule row_sweep:
    input:
        model=lambda wc: model_input(wc.model),
        tasks=expand("results/tasks/{task}.examples.jsonl", task=tasks_of("mmlu")),
    output:
        "results/row_sweep/{model}/{head_set}.csv",
        answers=ROW_SWEEP_ANSWERS,
    wildcard_constraints:
        head_set=r"[A-Za-z0-9_]+",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu"),
        heads=lambda wc: ROW_SWEEP["head_sets"][wc.head_set],
        conditions=["none", *ROW_SWEEP.get("position_sets", [])],
        batch_size=ROW_SWEEP.get("batch_size", EVAL["batch_size"]),
        fields=lambda wc: result_fields(wc.model, "row_sweep"),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/row_sweep/{model}/{head_set}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/row_sweep.py"


rule row_sweep_figure:
    input:
        ROW_SWEEP_OUTPUTS,
    output:
        png=report(f"{FIGURES}/row_sweep.png", caption="../report/row_sweep.rst", category="Masking"),
        pdf=f"{FIGURES}/row_sweep.pdf",
        csv=f"{FIGURES}/row_sweep.csv",
        md=f"{FIGURES}/row_sweep.md",
    log:
        "logs/figures/row_sweep.log",
    conda:
        CPU_ENV
    script:
        "../scripts/row_sweep_figure.py"


EXPERIMENT_REGISTRY.declare(
    "ssm_masking",
    targets=lambda: [f"{FIGURES}/ssm_masking.png", f"{FIGURES}/ssm_masking.md",
                     *expand(MASKING_ANSWERS, model=experiment_models("ssm_masking"), mode=MASKING_MODES)],
    batched={"ssm_masking": lambda wc: (), "export_mc_task": lambda wc: ()},
    plan={"ssm_masking": Estimator("gna.plan.job_estimates:masked_mixers", experiment="ssm_masking")},
    findings=[Section(50, "gna.report.findings.hybrids:ssm_masking",
                      {"answers": MASKING_ANSWERS, "tasks": {"mmlu": tasks_of("mmlu")}})],
)
EXPERIMENT_REGISTRY.declare(
    "hybrid_attention",
    targets=lambda: [f"{FIGURES}/hybrid_attention.md",
                     *answers_beside(f for files in HYBRID_ATTENTION_OUTPUTS.values() for f in files)],
    batched={"hybrid_attention": lambda wc: ()},
    plan={"hybrid_attention": Estimator("gna.plan.job_estimates:evaluation",
                                        {"roles": ["mmlu", "retrieval", "knowledge"]})},
    # k = 0's answers: beside the file hybrid_attention_files reads its row from (top-k removal's k0, or its own)
    findings=[Section(51, "gna.report.findings.hybrids:hybrid_attention",
                      {"answers": HYBRID_ATTENTION_ANSWERS,
                       "tasks": {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge")},
                       "base_answers": {m: files[0].removesuffix(".csv") + ".answers.csv"
                                        for m, files in HYBRID_ATTENTION_OUTPUTS.items()
                                        if files and files[0].endswith("k0.csv")}})],
)
EXPERIMENT_REGISTRY.declare(
    "row_sweep",
    targets=lambda: [f"{FIGURES}/row_sweep.png", f"{FIGURES}/row_sweep.md", *answers_beside(ROW_SWEEP_OUTPUTS)],
    batched={"row_sweep": lambda wc: ()},
    plan={"row_sweep": Estimator("gna.plan.job_estimates:masked_positions", experiment="row_sweep")},
    findings=[Section(52, "gna.report.findings.hybrids:row_sweep",
                      {"answers": ROW_SWEEP_ANSWERS, "tasks": {"mmlu": tasks_of("mmlu")}})],
)
