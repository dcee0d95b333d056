# The questions the paper leaves open, on the scan's ranking (gna.questions; docs/open-questions.md):
# complementary or redundant head pairs and the smallest head set that takes retrieval to chance,
# format-sensitive heads, rankings repeated over probe seeds, and a ranking as mohawk's inputs.


HEAD_PAIRS = experiment_config("head_pairs")
PROBE_FORMATS = experiment_config("probe_formats")
RANKING_SEEDS = experiment_config("ranking_seeds")
MOHAWK_EXPORT = experiment_config("mohawk_export")
GA_PATHS = experiment_config("ga_paths")
# An experiment that takes its heads from the ranking across formats or over seeds needs that experiment's settings.
for _exp in EXPERIMENTS:
    _choice = experiment_config(_exp).get("ranking", "single")
    _needs = {"across_formats": "probe_formats", "over_seeds": "ranking_seeds"}.get(_choice)
    if _needs and not experiment_config(_needs):
        raise ValueError(f"experiments.{_exp}.ranking = {_choice} needs experiments.{_needs} (its settings)")


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


rule format_probes:
    # One KV retrieval in every format of probe_formats.formats, on the same keys, values and queries;
    # {values_tag}: the value rule's part of the names ("" for the paper's 0-99; the script reads it)
    output:
        [format_probe(f, "{values_tag}") for f in PROBE_FORMATS.get("formats", [])],
    wildcard_constraints:
        values_tag="|".join(re.escape(rule_tag(r)) for r in VALUE_RULES),
    params:
        formats=PROBE_FORMATS.get("formats"),
        key_pool=PROBE_FORMATS.get("keys"),
        n_options=PROBE_FORMATS.get("n_options"),
        n_pairs=config["scan"]["n_pairs"],
        n_examples=PROBE_FORMATS.get("n_examples") or config["kv_probe"]["n_examples"],
        seed=config["kv_probe"]["seed"],
        separator=config["kv_probe"]["separator"],
    log:
        "logs/probes/formats{values_tag}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/format_probes.py"


rule format_scan:
    # The scan under every format; the rank correlations and the ranking across formats.
    input:
        model=lambda wc: model_input(wc.model),
        probes=lambda wc: [format_probe(f, model_rule_tag(wc.model)) for f in PROBE_FORMATS.get("formats", [])],
    output:
        rankings="results/questions/formats/{model}.rankings.csv",
        ranking="results/questions/formats/{model}.ranking.csv",
    params:
        spec=lambda wc: model_spec(wc.model),
        formats=PROBE_FORMATS.get("formats"),
        top_k=PROBE_FORMATS.get("top_k"),
        above_chance=PROBE_FORMATS.get("above_chance"),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/questions/formats/{model}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/format_scan.py"


rule probe_formats_figure:
    input:
        rankings=expand("results/questions/formats/{model}.rankings.csv", model=experiment_models("probe_formats")),
        across=expand("results/questions/formats/{model}.ranking.csv", model=experiment_models("probe_formats")),
    output:
        png=report(f"{FIGURES}/probe_formats.png", caption="../report/probe_formats.rst", category="Open questions"),
        pdf=f"{FIGURES}/probe_formats.pdf",
        md=f"{FIGURES}/probe_formats.md",
        csv=f"{FIGURES}/probe_formats.csv",
    params:
        top_k=PROBE_FORMATS.get("top_k"),
    log:
        "logs/figures/probe_formats.log",
    conda:
        CPU_ENV
    script:
        "../scripts/probe_formats_figure.py"


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


rule mohawk_export:
    # A ranking's top k as goombalab/mohawk's architecture_<k>.yaml and --heads map (gna export).
    input:
        ranking=lambda wc: MOHAWK_EXPORT["ranking"].format(model=wc.model),
    output:
        yaml="results/questions/mohawk/{model}/architecture_{k}.yaml",
        heads="results/questions/mohawk/{model}/heads_{k}.txt",
    wildcard_constraints:
        k=r"\d+",
    params:
        n_layers=lambda wc: n_layers(wc.model),
        source=lambda wc: model_source(wc.model),
        head_dim=MOHAWK_EXPORT.get("head_dim"),
    log:
        "logs/questions/mohawk/{model}/architecture_{k}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/mohawk_export.py"


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
    "head_pairs",
    targets=lambda: [f"{FIGURES}/head_pairs.png", f"{FIGURES}/head_pairs.md"],
    batched={"head_pairs": lambda wc: ()},
    plan={"head_pairs": Estimator("gna.plan.question_rows:head_sets", experiment="head_pairs")},
)
EXPERIMENT_REGISTRY.declare(
    "probe_formats",
    targets=lambda: [f"{FIGURES}/probe_formats.png", f"{FIGURES}/probe_formats.md"],
    plan={"format_scan": Estimator("gna.plan.question_rows:format_scans", experiment="probe_formats")},
)
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
EXPERIMENT_REGISTRY.declare(
    "ga_paths",
    targets=lambda: [f"{FIGURES}/ga_paths.png", f"{FIGURES}/ga_paths.md"],
    plan={"ga_paths": Estimator("gna.plan.question_rows:path_patching", experiment="ga_paths")},
)
EXPERIMENT_REGISTRY.declare(
    "mohawk_export",
    targets=lambda: [f"results/questions/mohawk/{m}/{name}_{k}.{ext}" for m in MOHAWK_EXPORT["models"]
                     for k in MOHAWK_EXPORT["k"] for name, ext in (("architecture", "yaml"), ("heads", "txt"))],
)
# The open questions' answers, each from the tables its experiment wrote (n/a where it did not run).
EXPERIMENT_REGISTRY.declare("open_questions", always=True,
                            findings=[Section(70, "gna.questions.answers:open_questions")])
