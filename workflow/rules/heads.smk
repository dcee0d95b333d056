# Head-level experiments on the scan's ranking: head keeping in the critical layers (Table 1),
# KV retrieval vs pairs without the top Gather / Aggregate head (Fig. 4), top-k removal on
# the retrieval-heavy and knowledge tasks (slide tables), ARC-C chat vs regular.


rule head_keeping:
    input:
        model=lambda wc: model_input(wc.model),
        minimal="results/pruning/{model}.minimal.json",
        critical="results/pruning/{model}.critical.json",
        ranking="results/scan/{model}.ranking.csv",
    output:
        "results/head_keeping/{model}/{condition}.csv",
    wildcard_constraints:
        condition="both|aggregate_only|gather_only|neither",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=tasks_of("mmlu", "knowledge"),
        fields=lambda wc: {"model": wc.model, "experiment": "head_keeping", "condition": wc.condition,
                           "seed": config["seed"]},
        eval=eval_params(),
        micro_data=MICRO_DATA,
    threads: THREADS
    resources:
        gpu=GPUS,
    log:
        "logs/head_keeping/{model}/{condition}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/head_keeping.py"


rule kv_pairs:
    input:
        model=lambda wc: model_input(wc.model),
        ga="results/scan/{model}.ga.csv",
        probes=expand("results/probes/{probe}.examples.jsonl",
                      probe=[probe_name(n) for n in EXPERIMENTS.get("kv_pairs", {}).get("pairs", [])]),
    output:
        "results/kv_pairs/{model}/{condition}.csv",
    wildcard_constraints:
        condition="full|no_gather|no_aggregate",
    params:
        spec=lambda wc: model_spec(wc.model),
        pairs=EXPERIMENTS.get("kv_pairs", {}).get("pairs", []),
        fields=lambda wc: {"model": wc.model, "experiment": "kv_pairs", "condition": wc.condition,
                           "seed": config["seed"]},
        eval=eval_params(),
    threads: THREADS
    resources:
        gpu=GPUS,
    log:
        "logs/kv_pairs/{model}/{condition}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/kv_pairs.py"


rule topk_removal:
    input:
        model=lambda wc: model_input(wc.model),
        ranking="results/scan/{model}.ranking.csv",
    output:
        "results/{experiment}/{model}/k{k}.csv",
    wildcard_constraints:
        experiment="topk_removal|arc_chat",
        k=r"\d+",
    params:
        spec=lambda wc: model_spec(wc.model),
        tasks=lambda wc: (tasks_of("mmlu", "retrieval", "knowledge") if wc.experiment == "topk_removal"
                          else tasks_of("arc_regular", "arc_chat")),
        fields=lambda wc: {"model": wc.model, "experiment": wc.experiment, "k": int(wc.k), "seed": config["seed"]},
        eval=eval_params(),
        micro_data=MICRO_DATA,
    threads: THREADS
    resources:
        gpu=GPUS,
    log:
        "logs/{experiment}/{model}/k{k}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/topk_removal.py"
