# Table 1: head keeping in the critical layers of the minimal model (gna.experiments.head_selection):
# each head of the critical layers ablated alone on MMLU (critical_heads, the discovered heads), then
# the conditions that keep some heads of those layers and ablate the rest (head_keeping), one table.


HEAD_KEEPING = experiment_config("head_keeping")
# a head-keeping condition's per-question answers (gna.evaluation.items), which the findings pair
KEEPING_ANSWERS = "results/head_keeping/{model}/{source}/{condition}.answers.csv"


rule critical_heads:
    # Each head of Table 1's critical layers (one or two) ablated alone in the minimal model, on MMLU.
    input:
        model=lambda wc: model_input(wc.model),
        minimal="results/pruning/{model}.minimal.json",
        critical="results/pruning/{model}.critical.json",
    output:
        "results/head_keeping/{model}.critical_heads.csv",
        answers="results/head_keeping/{model}.critical_heads.answers.csv",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu"),
        fields=lambda wc: result_fields(wc.model, "critical_heads"),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/head_keeping/{model}.critical_heads.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/critical_heads.py"


rule head_keeping:
    input:
        model=lambda wc: model_input(wc.model),
        minimal="results/pruning/{model}.minimal.json",
        critical="results/pruning/{model}.critical.json",
        heads=lambda wc: ["results/head_keeping/{model}.critical_heads.csv"] if wc.source == "discovered" else [],
        # the scan variant (head_keeping.scan_heads): the KV scan's classified ranking
        ga=lambda wc: ["results/scan/{model}.ga.csv"] if wc.source == "scan" else [],
    output:
        "results/head_keeping/{model}/{source}/{condition}.csv",
        answers=KEEPING_ANSWERS,
    wildcard_constraints:
        source="named|discovered|scan",
        condition="both|aggregate_only|gather_only|neither",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu", "knowledge"),
        named=lambda wc: HEAD_KEEPING.get("named_heads", {}).get(wc.model),
        per_layer=lambda wc: HEAD_KEEPING["heads_per_layer"],
        # only where the scan's heads are read off their patterns: a study that reads roles keeps its params
        **({"heads_by": "pattern", "threshold": config["scan"]["threshold"]}
           if HEAD_KEEPING.get("scan_heads_by") == "pattern" else {}),
        fields=lambda wc: result_fields(wc.model, "head_keeping", source=wc.source, condition=wc.condition),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/head_keeping/{model}/{source}/{condition}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/head_keeping.py"


rule head_keeping_table:
    input:
        [f"results/head_keeping/{m}/{source}/{condition}.csv" for m in experiment_models("head_keeping")
         for source in keeping_sources(m) for condition in ["both", "aggregate_only", "gather_only", "neither"]],
    output:
        csv=f"{FIGURES}/head_keeping.csv",
        md=report(f"{FIGURES}/head_keeping.md", caption="../report/head_keeping.rst", category="Heads"),
    params:
        models=experiment_models("head_keeping"),
        counts=[4 * len(keeping_sources(m)) for m in experiment_models("head_keeping")],
        roles=task_roles("mmlu_knowledge"),
    log:
        "logs/figures/head_keeping.log",
    conda:
        CPU_ENV
    script:
        "../scripts/head_keeping_table.py"


EXPERIMENT_REGISTRY.declare(
    "head_keeping",
    targets=lambda: [f"{FIGURES}/head_keeping.md"],
    batched={"head_keeping": lambda wc: ()},
    plan={"critical_heads": Estimator("gna.plan.job_estimates:critical_heads", {"roles": ["mmlu"]}),
          "head_keeping": Estimator("gna.plan.job_estimates:evaluation",
                                    {"roles": ["mmlu", "knowledge"], "layers": "minimal"})},
    findings=[Section(20, "gna.report.findings.heads:head_keeping",
                      {"answers": KEEPING_ANSWERS, "minimal_answers": GRADUAL_ANSWERS,
                       "tasks": {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge")}})],
)
