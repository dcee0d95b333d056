# Final rules: every paper table and figure, ours beside the published numbers.


rule head_keeping_table:
    input:
        [f"results/head_keeping/{m}/{source}/{condition}.csv" for m in experiment_models("head_keeping")
         for source in keeping_sources(m) for condition in ["both", "aggregate_only", "gather_only", "neither"]],
    output:
        csv="figures/head_keeping.csv",
        md=report("figures/head_keeping.md", caption="../report/head_keeping.rst", category="Heads"),
    params:
        models=experiment_models("head_keeping"),
        counts=[4 * len(keeping_sources(m)) for m in experiment_models("head_keeping")],
        roles=task_roles("mmlu_knowledge"),
    log:
        "logs/figures/head_keeping.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/report_heads.py"


rule kv_pairs_figure:
    input:
        expand("results/kv_pairs/{model}/{condition}.csv", model=experiment_models("kv_pairs"),
               condition=["full", "no_gather", "no_aggregate"]),
    output:
        png=report("figures/kv_pairs.png", caption="../report/kv_pairs.rst", category="Heads"),
        pdf="figures/kv_pairs.pdf",
        csv="figures/kv_pairs.csv",
        md="figures/kv_pairs.md",
    params:
        models=experiment_models("kv_pairs"),
        counts=[3] * len(experiment_models("kv_pairs")),
    log:
        "logs/figures/kv_pairs.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/report_heads.py"


rule topk_tables:
    input:
        lambda wc: [f for files in topk_outputs(wc.experiment).values() for f in files],
    output:
        csv="figures/{experiment}.csv",
        md=report("figures/{experiment}.md", caption="../report/topk_tables.rst", category="Heads"),
    wildcard_constraints:
        experiment="topk_removal|arc_chat",
    params:
        models=lambda wc: experiment_models(wc.experiment),
        counts=lambda wc: [len(files) for files in topk_outputs(wc.experiment).values()],
        roles=lambda wc: task_roles("topk" if wc.experiment == "topk_removal" else "arc"),
        paper_keys=lambda wc: paper_keys(experiment_models(wc.experiment)),
        published=lambda wc: "ablation_topk.csv" if wc.experiment == "topk_removal" else "arc_chat_vs_regular.csv",
    log:
        "logs/figures/{experiment}.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/report_heads.py"


rule topk_figure:
    input:
        "figures/topk_removal.csv",
    output:
        png=report("figures/topk_removal.png", caption="../report/topk_removal.rst", category="Heads"),
        pdf="figures/topk_removal.pdf",
    log:
        "logs/figures/topk_removal_figure.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/report_heads.py"


rule ga_heatmaps:
    input:
        models=[m for name in experiment_models("heatmaps") for m in model_input(name)],
        ga=expand("results/scan/{model}.ga.csv", model=experiment_models("heatmaps")),
        probe=f"results/probes/{probe_name(config['scan']['n_pairs'])}.examples.jsonl",
    output:
        png=report("figures/ga_heatmaps.png", caption="../report/ga_heatmaps.rst", category="Heads"),
        pdf="figures/ga_heatmaps.pdf",
    params:
        specs={name: model_spec(name) for name in experiment_models("heatmaps")},
    resources:
        gpu=GPUS,
    log:
        "logs/figures/ga_heatmaps.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/ga_heatmaps.py"


rule findings:
    input:
        [t for t in all_targets() if t != "figures/findings.md"],
    output:
        report("figures/findings.md", caption="../report/findings.rst", category="Findings"),
    params:
        # the thresholds the verdicts use (gna.report.findings): the layer-pruning experiment's
        settings={key: LAYER_PRUNING.get(key) for key in ("mmlu_chance", "tolerance", "collapse",
                                                          "knowledge_tolerance")},
        rankings={m: f"results/scan/{m}.ranking.csv" for m in SCAN_MODELS},
    log:
        "logs/figures/findings.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/findings.py"
