# An open question of the paper (gna.questions; docs/open-questions.md): does the ranking
# hold over probe seeds? The scan repeated on prompts of other seeds.


RANKING_SEEDS = experiment_config("ranking_seeds")


rule ranking_seed_scan:
    # The scan on another probe seed's prompts (the exact ranking; kv_probe.seed's is the scan's own).
    input:
        model=lambda wc: model_input(wc.model),
        probe=lambda wc: probe_path(seed=int(wc.seed), model=wc.model),
    output:
        "results/questions/seeds/{model}/s{seed}.ranking.csv",
    wildcard_constraints:
        seed=r"\d+",
    params:
        spec=lambda wc: model_spec(wc.model),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/questions/seeds/{model}/s{seed}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/ranking_seed_scan.py"


rule ranking_seeds:
    # A model's rankings over the probe seeds: each head's rank spread and rank interval over prompts and
    # seeds (every head ablated again on every seed's prompts, per prompt), the top-k overlap, the stable ranking.
    input:
        model=lambda wc: model_input(wc.model),
        rankings=lambda wc: [seed_ranking(wc.model, s) for s in RANKING_SEEDS["seeds"]],
        probes=lambda wc: [probe_path(seed=s, model=wc.model) for s in RANKING_SEEDS["seeds"]],
    output:
        spread="results/questions/seeds/{model}.spread.csv",
        ranking="results/questions/seeds/{model}.ranking.csv",
    wildcard_constraints:
        model=r"[^/]+",
    params:
        spec=lambda wc: model_spec(wc.model),
        seeds=RANKING_SEEDS.get("seeds"),
        top_k=RANKING_SEEDS.get("top_k"),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/questions/seeds/{model}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/ranking_seeds.py"


rule ranking_seeds_figure:
    input:
        expand("results/questions/seeds/{model}.spread.csv", model=experiment_models("ranking_seeds")),
    output:
        png=report(f"{FIGURES}/ranking_seeds.png", caption="../report/ranking_seeds.rst", category="Open questions"),
        pdf=f"{FIGURES}/ranking_seeds.pdf",
        md=f"{FIGURES}/ranking_seeds.md",
        csv=f"{FIGURES}/ranking_seeds.csv",
    params:
        top_k=RANKING_SEEDS.get("top_k"),
    log:
        "logs/figures/ranking_seeds.log",
    conda:
        CPU_ENV
    script:
        "../scripts/ranking_seeds_figure.py"


EXPERIMENT_REGISTRY.declare(
    "ranking_seeds",
    targets=lambda: [f"{FIGURES}/ranking_seeds.png", f"{FIGURES}/ranking_seeds.md"],
    batched={"ranking_seed_scan": lambda wc: ()},
    # the seeds' rankings, which ranking_seeds takes by wildcard
    batch_inputs=lambda: [seed_ranking(m, s) for m in experiment_models("ranking_seeds")
                          for s in RANKING_SEEDS.get("seeds") or []],
    plan={"ranking_seed_scan": Estimator("gna.plan.question_rows:one_scan"),
          "ranking_seeds": Estimator("gna.plan.question_rows:seed_scans", experiment="ranking_seeds")},
)
