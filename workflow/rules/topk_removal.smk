# Top-k removal (the slides' tables): the scan's top-k KV heads removed, against k random heads of
# the same kinds, on the retrieval-heavy and knowledge tasks; and ARC-C chat vs regular (arc_chat),
# which runs on the same rule (its wildcard `experiment`).


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
