# Layer pruning (paper Figs. 2-3): gradual truncation from the end, then removing one layer
# at a time from the minimal model that experiment 1 finds.

LAYER_PRUNING = experiment_config("layer_pruning")
# each evaluation's per-question answers (gna.evaluation.items), which the findings pair (the gradual
# depths': GRADUAL_ANSWERS, common.smk)
INDIVIDUAL_ANSWERS = "results/pruning/{model}/individual/layer{layer}.answers.csv"
PRUNING_TASKS = {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge")}


rule gradual_pruning:
    input:
        model=lambda wc: model_input(wc.model),
    output:
        "results/pruning/{model}/gradual/depth{depth}.csv",
        answers=GRADUAL_ANSWERS,
    wildcard_constraints:
        depth=r"\d+",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu", "knowledge"),
        interventions=lambda wc: [{"truncate": int(wc.depth)}],
        fields=lambda wc: result_fields(wc.model, "gradual_pruning", depth=int(wc.depth)),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/pruning/{model}/gradual/depth{depth}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/gradual_pruning.py"


rule minimal_model:
    # the depths' answers too: a depth is cut only where its paired interval says so
    input:
        depths=lambda wc: expand("results/pruning/{{model}}/gradual/depth{depth}.csv",
                                 depth=range(1, n_layers(wc.model) + 1)),
        answers=lambda wc: expand(GRADUAL_ANSWERS, model=wc.model, depth=range(1, n_layers(wc.model) + 1)),
    output:
        table="results/pruning/{model}.gradual.csv",
        minimal="results/pruning/{model}.minimal.json",
    params:
        mmlu=tasks_of("mmlu"),
        depths=lambda wc: list(range(1, n_layers(wc.model) + 1)),
        tolerance=lambda wc: LAYER_PRUNING["tolerance"],
    log:
        "logs/pruning/{model}.minimal.log",
    conda:
        CPU_ENV
    script:
        "../scripts/minimal_model.py"


rule individual_pruning:
    input:
        model=lambda wc: model_input(wc.model),
        minimal="results/pruning/{model}.minimal.json",
    output:
        "results/pruning/{model}/individual/layer{layer}.csv",
        answers=INDIVIDUAL_ANSWERS,
    wildcard_constraints:
        layer=r"\d+",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu", "knowledge"),
        fields=lambda wc: result_fields(wc.model, "individual_pruning", layer=int(wc.layer)),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/pruning/{model}/individual/layer{layer}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/individual_pruning.py"


rule critical_layers:
    input:
        layers=lambda wc: expand("results/pruning/{{model}}/individual/layer{layer}.csv",
                                 layer=range(n_layers(wc.model))),
        # each question's answer: the minimal model's (a gradual depth) against each removal's
        layer_answers=lambda wc: expand(INDIVIDUAL_ANSWERS, model=wc.model, layer=range(n_layers(wc.model))),
        gradual_answers=lambda wc: expand(GRADUAL_ANSWERS, model=wc.model, depth=range(1, n_layers(wc.model) + 1)),
        gradual="results/pruning/{model}.gradual.csv",
        minimal="results/pruning/{model}.minimal.json",
    output:
        table="results/pruning/{model}.individual.csv",
        critical="results/pruning/{model}.critical.json",
    params:
        mmlu=tasks_of("mmlu"),
        knowledge=tasks_of("knowledge"),
        layers=lambda wc: list(range(n_layers(wc.model))),
        depths=lambda wc: list(range(1, n_layers(wc.model) + 1)),
        chance=lambda wc: LAYER_PRUNING["mmlu_chance"],
        collapse=lambda wc: LAYER_PRUNING["collapse"],
        knowledge_margin=lambda wc: LAYER_PRUNING["knowledge_margin"],
        knowledge_chance=lambda wc: LAYER_PRUNING.get("knowledge_chance"),
    log:
        "logs/pruning/{model}.critical.log",
    conda:
        CPU_ENV
    script:
        "../scripts/critical_layers.py"


rule pruning_figures:
    input:
        gradual=expand("results/pruning/{model}.gradual.csv", model=experiment_models("layer_pruning")),
        individual=expand("results/pruning/{model}.individual.csv", model=experiment_models("layer_pruning")),
        minimal=expand("results/pruning/{model}.minimal.json", model=experiment_models("layer_pruning")),
    output:
        gradual=report(f"{FIGURES}/gradual_pruning.png", caption="../report/gradual_pruning.rst", category="Layers"),
        gradual_pdf=f"{FIGURES}/gradual_pruning.pdf",
        individual=report(f"{FIGURES}/individual_pruning.png", caption="../report/individual_pruning.rst",
                          category="Layers"),
        individual_pdf=f"{FIGURES}/individual_pruning.pdf",
        csv=f"{FIGURES}/layer_pruning.csv",
        md=f"{FIGURES}/layer_pruning.md",
    params:
        models=experiment_models("layer_pruning"),
        mmlu=tasks_of("mmlu"),
        knowledge=tasks_of("knowledge"),
    log:
        "logs/figures/pruning.log",
    conda:
        CPU_ENV
    script:
        "../scripts/pruning_figures.py"


EXPERIMENT_REGISTRY.declare(
    "layer_pruning",
    targets=lambda: [f"{FIGURES}/gradual_pruning.png", f"{FIGURES}/individual_pruning.png"],
    batched={"gradual_pruning": lambda wc: (), "individual_pruning": lambda wc: ()},
    # a model's depths from one forward per request batch, its removals from the layers below each
    shared={"gradual_pruning": lambda wc: (wc["model"],), "individual_pruning": lambda wc: (wc["model"],)},
    # the per-model depths and layers, which minimal_model and critical_layers take by wildcard
    batch_inputs=lambda: [f"results/pruning/{m}/{kind}{i}.csv" for m in experiment_models("layer_pruning")
                          for kind, first in (("gradual/depth", 1), ("individual/layer", 0))
                          for i in range(first, n_layers(m) + first)],
    plan={"gradual_pruning": Estimator("gna.plan.job_estimates:evaluation",
                                       {"roles": ["mmlu", "knowledge"], "layers": "depth"}),
          "individual_pruning": Estimator("gna.plan.job_estimates:evaluation",
                                          {"roles": ["mmlu", "knowledge"], "layers": "minimal_minus_layer"})},
    findings=[Section(10, "gna.report.findings.pruning:gradual", {"answers": GRADUAL_ANSWERS, "tasks": PRUNING_TASKS}),
              Section(11, "gna.report.findings.pruning:individual",
                      {"answers": GRADUAL_ANSWERS, "removed_answers": INDIVIDUAL_ANSWERS, "tasks": PRUNING_TASKS,
                       "critical_json": "results/pruning/{model}.critical.json"})],
)
