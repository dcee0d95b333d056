# An open question of the paper (gna.questions; docs/open-questions.md): are the top heads
# complementary or redundant in pairs, and which smallest head set takes retrieval to chance?


HEAD_PAIRS = experiment_config("head_pairs")


rule head_pairs:
    # Every pair of the top heads ablated together against independence, then the smallest sets that reach
    # chance, by exhaustive search over the candidate pool.
    input:
        model=lambda wc: model_input(wc.model),
        probe=lambda wc: probe_path(model=wc.model),
        ranking="results/scan/{model}.ranking.csv",
    output:
        pairs="results/questions/pairs/{model}.pairs.csv",
        minimal="results/questions/pairs/{model}.minimal.csv",
    params:
        spec=lambda wc: model_spec(wc.model),
        top=HEAD_PAIRS.get("top"),
        candidates=HEAD_PAIRS.get("candidates"),
        chance_margin=HEAD_PAIRS.get("chance_margin"),
        max_size=HEAD_PAIRS.get("max_size"),
        n_examples=HEAD_PAIRS.get("n_examples"),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/questions/pairs/{model}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/head_pairs.py"


rule head_pairs_figure:
    input:
        pairs=expand("results/questions/pairs/{model}.pairs.csv", model=experiment_models("head_pairs")),
        minimal=expand("results/questions/pairs/{model}.minimal.csv", model=experiment_models("head_pairs")),
        ga=expand("results/scan/{model}.ga.csv", model=experiment_models("head_pairs")),
    output:
        png=report(f"{FIGURES}/head_pairs.png", caption="../report/head_pairs.rst", category="Open questions"),
        pdf=f"{FIGURES}/head_pairs.pdf",
        md=f"{FIGURES}/head_pairs.md",
        csv=f"{FIGURES}/head_pairs.csv",
        minimal=f"{FIGURES}/head_pairs_minimal.csv",
    log:
        "logs/figures/head_pairs.log",
    conda:
        CPU_ENV
    script:
        "../scripts/head_pairs_figure.py"


EXPERIMENT_REGISTRY.declare(
    "head_pairs",
    targets=lambda: [f"{FIGURES}/head_pairs.png", f"{FIGURES}/head_pairs.md"],
    batched={"head_pairs": lambda wc: ()},
    plan={"head_pairs": Estimator("gna.plan.question_rows:head_sets", experiment="head_pairs")},
)
