# Head-level experiments on the scan's ranking: head keeping in the critical layers (Table 1),
# KV retrieval vs pairs without the top Gather / Aggregate head (Fig. 4), top-k removal on
# the retrieval-heavy and knowledge tasks (slide tables), ARC-C chat vs regular.


HEAD_KEEPING = experiment_config("head_keeping")
KV_PAIRS = experiment_config("kv_pairs")
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


# (n_pairs, probe seed) of every Fig. 4 probe set, in the order of the rule's probe inputs
KV_PAIRS_PROBES = [(n, s) for n in (KV_PAIRS["pairs"] if KV_PAIRS else []) for s in kv_pairs_seeds()]


rule kv_pairs:
    input:
        model=lambda wc: model_input(wc.model),
        ga="results/scan/{model}.ga.csv",
        probes=lambda wc: [probe_path(n, s, model=wc.model) for n, s in KV_PAIRS_PROBES],
    output:
        "results/kv_pairs/{model}/{condition}.csv",
        answers="results/kv_pairs/{model}/{condition}.answers.csv",
    wildcard_constraints:
        condition="full|no_gather|no_aggregate",
    params:
        spec=lambda wc: model_spec(wc.model),
        probes=[list(x) for x in KV_PAIRS_PROBES],
        named=lambda wc: KV_PAIRS.get("named_heads", {}).get(wc.model),
        # the first n prompts of each probe set, only where set (a study that scores all keeps its params)
        **({"n_examples": KV_PAIRS["n_examples"]} if KV_PAIRS.get("n_examples") else {}),
        # only where the heads are read off their patterns: a study that reads roles keeps its params
        **({"heads_by": "pattern", "threshold": config["scan"]["threshold"]} if KV_PAIRS.get("heads_by") == "pattern"
           else {}),
        fields=lambda wc: result_fields(wc.model, "kv_pairs", condition=wc.condition),
        eval=eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/kv_pairs/{model}/{condition}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/kv_pairs.py"


rule topk_removal:
    # k{k}.csv: the top-k heads of the ranking removed; k{k}-random{seed}.csv: the random-k control,
    # k heads of the same kinds drawn with that seed (topk_removal.random_draws).
    input:
        model=lambda wc: model_input(wc.model),
        ranking=lambda wc: ranking_file(EXPERIMENTS[wc.experiment].get("ranking"), wc.model),
        kv=lambda wc: [topk_kv_probe(wc.experiment, wc.model)[1]] if topk_kv_probe(wc.experiment, wc.model) else [],
    output:
        "results/{experiment}/{model}/k{k}{draw}.csv",
        answers="results/{experiment}/{model}/k{k}{draw}.answers.csv",
    wildcard_constraints:
        experiment="topk_removal|arc_chat",
        k=r"\d+",
        draw=r"(-random\d+)?",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=lambda wc: (tasks_of("mmlu", "retrieval", "knowledge") if wc.experiment == "topk_removal"
                          else tasks_of("arc_regular", "arc_chat")),
        # the positive control (topk_removal.kv_control): its probe scored beside the tasks (without one, no
        # param: a study that has none keeps its params)
        **({"kv_probes": lambda wc: dict([topk_kv_probe(wc.experiment, wc.model)] if topk_kv_probe(
            wc.experiment, wc.model) else [])} if experiment_config("topk_removal").get("kv_control") else {}),
        fields=lambda wc: {**result_fields(wc.model, wc.experiment, k=int(wc.k)),
                           **({"selection": "random", "draw": int(wc.draw.removeprefix("-random"))} if wc.draw
                              else {"selection": "ranked"}),
                           **({"ranking": EXPERIMENTS[wc.experiment]["ranking"]}
                              if EXPERIMENTS[wc.experiment].get("ranking", "single") != "single" else {})},
        kinds=lambda wc: EXPERIMENTS[wc.experiment].get("kinds_by_model", {}).get(wc.model),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/{experiment}/{model}/k{k}{draw}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/topk_removal.py"


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


rule kv_pairs_figure:
    input:
        expand("results/kv_pairs/{model}/{condition}.csv", model=experiment_models("kv_pairs"),
               condition=["full", "no_gather", "no_aggregate"]),
    output:
        png=report(f"{FIGURES}/kv_pairs.png", caption="../report/kv_pairs.rst", category="Heads"),
        pdf=f"{FIGURES}/kv_pairs.pdf",
        csv=f"{FIGURES}/kv_pairs.csv",
        md=f"{FIGURES}/kv_pairs.md",
    params:
        models=experiment_models("kv_pairs"),
        counts=[3] * len(experiment_models("kv_pairs")),
    log:
        "logs/figures/kv_pairs.log",
    conda:
        CPU_ENV
    script:
        "../scripts/kv_pairs_figure.py"


rule topk_tables:
    input:
        lambda wc: [f for files in topk_outputs(wc.experiment).values() for f in files],
    output:
        csv=f"{FIGURES}/{{experiment}}.csv",
        md=report(f"{FIGURES}/{{experiment}}.md", caption="../report/topk_tables.rst", category="Heads"),
    wildcard_constraints:
        experiment="topk_removal|arc_chat",
    params:
        models=lambda wc: experiment_models(wc.experiment),
        counts=lambda wc: [len(files) for files in topk_outputs(wc.experiment).values()],
        roles=lambda wc: task_roles("topk" if wc.experiment == "topk_removal" else "arc"),
        paper_keys=lambda wc: paper_keys(experiment_models(wc.experiment)),
        published=lambda wc: "ablation_topk.csv" if wc.experiment == "topk_removal" else "arc_chat_vs_regular.csv",
        title=lambda wc: ("Removing the top-k KV-retrieval heads (slide tables)" if wc.experiment == "topk_removal"
                          else "ARC-C chat vs regular under top-k removal"),
    log:
        "logs/figures/{experiment}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/topk_tables.py"


rule topk_figure:
    input:
        f"{FIGURES}/topk_removal.csv",
    output:
        png=report(f"{FIGURES}/topk_removal.png", caption="../report/topk_removal.rst", category="Heads"),
        pdf=f"{FIGURES}/topk_removal.pdf",
    log:
        "logs/figures/topk_removal_figure.log",
    conda:
        CPU_ENV
    script:
        "../scripts/topk_figure.py"


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
EXPERIMENT_REGISTRY.declare(
    "kv_pairs",
    targets=lambda: [f"{FIGURES}/kv_pairs.png"],
    batched={"kv_pairs": lambda wc: ()},
    plan={"kv_pairs": Estimator("gna.plan.job_estimates:probe_pairs", experiment="kv_pairs")},
    # Fig. 4's n from its own probes (kv_pairs.n_examples, else all of kv_probe's), paired per prompt and seed
    findings=[Section(21, "gna.report.findings.heads:kv_pairs",
                      {"prompts": (KV_PAIRS or {}).get("n_examples") or config["kv_probe"]["n_examples"],
                       "answers": "results/kv_pairs/{model}/{condition}.answers.csv"})],
)
# The topk_removal rule runs both experiments (its wildcard `experiment`): top-k removal on the
# retrieval-heavy and knowledge tasks, and ARC-C regular vs chat.
EXPERIMENT_REGISTRY.declare(
    "topk_removal",
    targets=lambda: [f"{FIGURES}/topk_removal.md", f"{FIGURES}/topk_removal.png"],
    batched={"topk_removal": lambda wc: ()},
    # a model's removals together, the layers below each one's lowest head run once
    shared={"topk_removal": lambda wc: (wc["model"], wc["experiment"])},
    # the per-model lists of k, which topk_tables takes by wildcard
    batch_inputs=lambda: [f for e in ("topk_removal", "arc_chat") for files in topk_outputs(e).values() for f in files],
    plan={"topk_removal": Estimator("gna.plan.job_estimates:evaluation_and_probe",
                                    {"roles": {"topk_removal": ["mmlu", "retrieval", "knowledge"],
                                               "arc_chat": ["arc_regular", "arc_chat"]}, "probe_for": "topk_removal"},
                                    experiment="topk_removal")},
    findings=[Section(22, "gna.report.findings.topk:topk",
                      {"name": "topk_removal.csv",
                       "claim": "Slides: removing the top-k KV heads hurts retrieval-heavy tasks more than removing k "
                                "random heads, knowledge holds",
                       # lambada where the study has it (perplexity: shown beside, not judged)
                       "retrieval": ["mmlu", "gsm8k", "swde", "bbh", "lambada"], "knowledge": ["knowledge"],
                       # each removal's answers, paired item by item; the random draws judged by draw
                       "answers": "results/topk_removal/{model}/k{k}{draw}.answers.csv",
                       "tasks": task_roles("topk"), "draws": random_draws("topk_removal")})],
)
EXPERIMENT_REGISTRY.declare(
    "arc_chat",
    targets=lambda: [f"{FIGURES}/arc_chat.md"],
    findings=[Section(23, "gna.report.findings.topk:topk",
                      {"name": "arc_chat.csv", "claim": "ARC-C chat (letter) falls under top-k removal, regular ARC-C holds",
                       "retrieval": ["arc_challenge_chat"], "knowledge": ["arc_challenge"],
                       "answers": "results/arc_chat/{model}/k{k}{draw}.answers.csv", "tasks": task_roles("arc"),
                       "draws": random_draws("arc_chat")})],
)
