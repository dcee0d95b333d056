# Head output norms beside the KV-retrieval ranking: are the heads the scan ranks first simply the
# heads that write the most into the residual stream? One job loads each model in turn.


rule head_norms:
    input:
        models=[m for name in experiment_models("head_norms") for m in model_input(name)],
        rankings=expand("results/scan/{model}.ranking.csv", model=experiment_models("head_norms")),
    output:
        f"{FIGURES}/head_norms.csv",
    params:
        specs={name: model_spec(name) for name in experiment_models("head_norms")},
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/figures/head_norms.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/head_norms.py"


EXPERIMENT_REGISTRY.declare(
    "head_norms",
    targets=lambda: [f"{FIGURES}/head_norms.csv"],
    plan={"head_norms": Estimator("gna.plan.job_estimates:models_loaded", experiment="head_norms")},
    findings=[Section(90, "gna.experiments.head_norms:findings",
                      {"top": experiment_config("head_norms").get("top", 5)})],
)
