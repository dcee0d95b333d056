# The final rule: the findings, every claim of the paper checked against the study's own tables.
# Each experiment's tables and figures sit beside it, in its own rule file.


rule findings:
    input:
        lambda wc: [t for t in all_targets() if t != f"{FIGURES}/findings.md"],
    output:
        report(f"{FIGURES}/findings.md", caption="../report/findings.rst", category="Findings"),
        # every part the findings print, as a table and as a forest plot (gna.report.findings.table)
        csv=f"{FIGURES}/verdicts.csv",
        png=report(f"{FIGURES}/verdicts.png", caption="../report/verdicts.rst", category="Findings"),
        pdf=f"{FIGURES}/verdicts.pdf",
    params:
        # the thresholds the verdicts use (gna.report.findings): the layer-pruning experiment's
        settings=lambda wc: {key: LAYER_PRUNING.get(key) for key in ("mmlu_chance", "tolerance", "collapse",
                                                                     "knowledge_tolerance", "knowledge_margin",
                                                                     "smallest_effect")}
        # where the study knows its knowledge tasks' chance (a key other studies' params do not carry)
        | ({"knowledge_chance": LAYER_PRUNING["knowledge_chance"]} if LAYER_PRUNING.get("knowledge_chance") else {})
        # on the local MMLU sample: accuracies with n and interval, and (the models not being the
        # paper's) the paper's Llama-3.1-8B beside them
        | ({"mmlu_n": config["benchmarks"]["mmlu"]["size"], "paper_beside": True,
            "task_n": findings_local_sizes(config)} if local_task_inputs() else {})
        # the micro study's tasks are local files: each role's questions counted, and the probe's prompts
        | ({"task_n": findings_task_sizes(config["tasks"], config["kv_probe"]["n_examples"])}
           if config["tasks"].get("micro_data") else {})
        | {"kv_n": config["kv_probe"]["n_examples"]},
        rankings={m: f"results/scan/{m}.ranking.csv" for m in SCAN_MODELS},
        # the experiments' claim checks, as their rule files declare them
        sections=lambda wc: EXPERIMENT_REGISTRY.sections(),
    log:
        "logs/figures/findings.log",
    conda:
        CPU_ENV
    script:
        "../scripts/findings.py"
