# Ablate a head only at the answer position: KV-retrieval accuracy with the scan's top head(s) zeroed
# nowhere, everywhere, or at each prompt's answer position only (gna.experiments.answer_position).


ANSWER_POSITION = experiment_config("answer_position")
# (n_pairs, probe seed) of every probe set a job scores, in the order of its probe inputs
ANSWER_POSITION_PROBES = [(n, s) for n in ANSWER_POSITION.get("pairs", [])
                          for s in other_probe_seeds(ANSWER_POSITION.get("probe_seeds"))]


rule answer_position:
    input:
        model=lambda wc: model_input(wc.model),
        ranking="results/scan/{model}.ranking.csv",
        probes=lambda wc: [probe_path(n, s, model=wc.model) for n, s in ANSWER_POSITION_PROBES],
    output:
        "results/answer_position/{model}/{ablated}.csv",
    wildcard_constraints:
        ablated="nowhere|everywhere|answer",
    params:
        spec=lambda wc: model_spec(wc.model),
        probes=[list(p) for p in ANSWER_POSITION_PROBES],
        top=ANSWER_POSITION.get("top"),
        batch_size=config["eval"]["batch_size"],
        fields=lambda wc: result_fields(wc.model, "answer_position", ablated=wc.ablated),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/answer_position/{model}/{ablated}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/answer_position.py"


EXPERIMENT_REGISTRY.declare(
    "answer_position",
    targets=lambda: expand("results/answer_position/{model}/{ablated}.csv",
                           model=experiment_models("answer_position"), ablated=["nowhere", "everywhere", "answer"]),
    # each job scores every probe set once, under its one condition
    plan={"answer_position": Estimator("gna.plan.job_estimates:probe_pairs", experiment="answer_position")},
)
