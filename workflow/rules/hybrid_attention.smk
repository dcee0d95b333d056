# Hybrid attention masking (section 5.3): the attention heads of a hybrid (Zamba2) masked.
# Reads config["experiments"]:
#   hybrid_attention.models  hybrids whose attention heads are masked (Zamba2)
#   hybrid_attention.k       top-k attention heads of the KV ranking among attention heads, or "all"
#                            (k_by_model per model); k = 0 (the unmodified model) is evaluated once
#   hybrid_attention.modes   last_row: the heads' softmax row at the answer position zeroed (the official
#                            code; "all" = every head of every invocation); ablate: the heads zeroed whole


HYBRID_ATTENTION = experiment_config("hybrid_attention")
HYBRID_ATTENTION_ANSWERS = "results/hybrid_attention/{model}/{mode}-k{k}.answers.csv"
# model -> its result files (hybrid_attention_files), in config order
HYBRID_ATTENTION_OUTPUTS = {m: hybrid_attention_files(m) for m in experiment_models("hybrid_attention")}


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


EXPERIMENT_REGISTRY.declare(
    "hybrid_attention",
    targets=lambda: [f"{FIGURES}/hybrid_attention.md",
                     *answers_beside(f for files in HYBRID_ATTENTION_OUTPUTS.values() for f in files)],
    batched={"hybrid_attention": lambda wc: ()},
    plan={"hybrid_attention": Estimator("gna.plan.job_estimates:evaluation",
                                        {"roles": ["mmlu", "retrieval", "knowledge"]})},
    # k = 0's answers: beside the file hybrid_attention_files reads its row from (top-k removal's k0, or its own)
    findings=[Section(51, "gna.report.findings.hybrid_attention:hybrid_attention",
                      {"answers": HYBRID_ATTENTION_ANSWERS,
                       "tasks": {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge")},
                       "base_answers": {m: files[0].removesuffix(".csv") + ".answers.csv"
                                        for m, files in HYBRID_ATTENTION_OUTPUTS.items()
                                        if files and files[0].endswith("k0.csv")}})],
)
