# Fig. 4: KV retrieval against the number of pairs, the model whole and without the scan's top
# Gather or top Aggregate head (gna.experiments.kv_pairs).


KV_PAIRS = experiment_config("kv_pairs")
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
