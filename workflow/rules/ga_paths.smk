# An open question of the paper (gna.questions; docs/open-questions.md): which Gather
# head feeds which Aggregate head? Path patching between the scan's top heads of each role.


GA_PATHS = experiment_config("ga_paths")


rule ga_paths:
    # Path patching: each top Gather's output removed only from each later top Aggregate's query, key or
    # value (every position, the value tokens, the final positions); its direct path to the logits.
    input:
        model=lambda wc: model_input(wc.model),
        probe=lambda wc: probe_path(model=wc.model),
        ga="results/scan/{model}.ga.csv",
    output:
        "results/questions/paths/{model}.csv",
    params:
        spec=lambda wc: model_spec(wc.model),
        n_gather=GA_PATHS.get("n_gather"),
        n_aggregate=GA_PATHS.get("n_aggregate"),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/questions/paths/{model}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/ga_paths.py"


rule ga_paths_figure:
    input:
        expand("results/questions/paths/{model}.csv", model=experiment_models("ga_paths")),
    output:
        png=report(f"{FIGURES}/ga_paths.png", caption="../report/ga_paths.rst", category="Open questions"),
        pdf=f"{FIGURES}/ga_paths.pdf",
        md=f"{FIGURES}/ga_paths.md",
        csv=f"{FIGURES}/ga_paths.csv",
    log:
        "logs/figures/ga_paths.log",
    conda:
        CPU_ENV
    script:
        "../scripts/ga_paths_figure.py"


EXPERIMENT_REGISTRY.declare(
    "ga_paths",
    targets=lambda: [f"{FIGURES}/ga_paths.png", f"{FIGURES}/ga_paths.md"],
    plan={"ga_paths": Estimator("gna.plan.question_rows:path_patching", experiment="ga_paths")},
)
