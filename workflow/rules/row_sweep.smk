# Row sweep: where heads aggregate on the MMLU prompt (gna.experiments.row_sweep). Reads
# config["experiments"]:
#   row_sweep.models         models whose head sets are row-masked at one named position set of the
#                            MMLU prompt at a time
#   row_sweep.head_sets      name -> attention | ssm | [[layer, head(, kind)], ...]
#   row_sweep.position_sets  answer, option_values, option_letters, option_closers, question, all_but_answer


ROW_SWEEP = experiment_config("row_sweep")
ROW_SWEEP_OUTPUTS = [f"results/row_sweep/{m}/{h}.csv" for m in experiment_models("row_sweep")
                     for h in ROW_SWEEP["head_sets"]] if ROW_SWEEP else []
# a row sweep's conditions in one file (one job), told apart by its condition column
ROW_SWEEP_ANSWERS = "results/row_sweep/{model}/{head_set}.answers.csv"


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
    "row_sweep",
    targets=lambda: [f"{FIGURES}/row_sweep.png", f"{FIGURES}/row_sweep.md", *answers_beside(ROW_SWEEP_OUTPUTS)],
    batched={"row_sweep": lambda wc: ()},
    plan={"row_sweep": Estimator("gna.plan.job_estimates:masked_positions", experiment="row_sweep")},
    findings=[Section(52, "gna.report.findings.row_sweep:row_sweep",
                      {"answers": ROW_SWEEP_ANSWERS, "tasks": {"mmlu": tasks_of("mmlu")}})],
)
