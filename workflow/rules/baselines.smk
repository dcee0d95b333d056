# The unmodified models on every benchmark (gna.experiments.baselines; docs/benchmarks.md): one job per
# (model, task), so each has its own CPU time and resumes on its own, then one table.
#
#   snakemake --cores 1 baseline_table     # figures/<study>/baselines.md and .csv
#
# Tasks: benchmarks.suite's (<task>_local, sized by benchmarks.suite.size), the local MMLU letter task
# (benchmarks.mmlu's sample) and the KV probe of experiments.baselines.kv_pairs pairs (each model's
# kv_values, kv_probe's format, seed and examples: the probe the scan ranks on at the scan's n_pairs).
from gna.experiments.baselines import kv_task

BASELINES = experiment_config("baselines")
BASELINE_DIR = "results/baselines"


def baseline_sources():
    """Task -> where its documents come from (suite, mmlu or kv), in the table's order."""
    if not BASELINES:
        return {}
    tasks = {t + SUITE_SUFFIX: "suite" for t in config["benchmarks"]["suite"]["tasks"]}
    if BASELINES["mmlu"]:
        tasks[LOCAL_MMLU_TASKS[0]] = "mmlu"
    if BASELINES["kv_pairs"] is not None:
        tasks[kv_task(BASELINES["kv_pairs"])] = "kv"
    return tasks


BASELINE_SOURCES = baseline_sources()


def baseline_inputs(wc):
    source = BASELINE_SOURCES[wc.task]
    if source == "kv":
        return {"probe": probe_path(BASELINES["kv_pairs"], model=wc.model)}
    if source == "mmlu":
        return {"sample": rules.local_mmlu.output.sample}
    return {"manifest": f"{LOCAL_SUITE_DIR}/manifest.json"}


def baseline_files(kind):
    return [f"{BASELINE_DIR}/{m}/{t}{kind}" for m in experiment_models("baselines") for t in BASELINE_SOURCES]


def baseline_sizes_note():
    suite, mmlu, kv = config["benchmarks"]["suite"], config["benchmarks"]["mmlu"], config["kv_probe"]
    note = (f"Samples (seeded): benchmarks.suite.size = {suite['size'] or 'all'} (a task not named: all its documents), "
            f"seed {suite['seed']}")
    if "mmlu" in BASELINE_SOURCES.values():
        note += f"; MMLU: {mmlu['size'] or 'all'} questions stratified by subject, seed {mmlu['seed']}"
    if "kv" in BASELINE_SOURCES.values():
        note += f"; KV: {kv['n_examples']} prompts of {BASELINES['kv_pairs']} pairs, seed {kv['seed']}"
    return note + "."


rule baseline:
    input:
        unpack(baseline_inputs),
        model=lambda wc: model_input(wc.model),
    output:
        f"{BASELINE_DIR}/{{model}}/{{task}}.csv",
        answers=f"{BASELINE_DIR}/{{model}}/{{task}}.answers.csv",
        cost=f"{BASELINE_DIR}/{{model}}/{{task}}.cost.json",
    wildcard_constraints:
        model=name_pattern(experiment_models("baselines")),
        task=name_pattern(BASELINE_SOURCES),
    params:
        source=lambda wc: BASELINE_SOURCES[wc.task],
        spec=lambda wc: model_spec(wc.model),
        fields=lambda wc: result_fields(wc.model, "baselines"),
        eval=eval_params(),
    log:
        "logs/baselines/{model}/{task}.log",
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    conda:
        MODEL_ENV
    script:
        "../scripts/baseline.py"


rule baseline_table:
    input:
        rows=baseline_files(".csv"),
        costs=baseline_files(".cost.json"),
    output:
        md=f"{FIGURES}/baselines.md",
        csv=f"{FIGURES}/baselines.csv",
    params:
        sizes_note=baseline_sizes_note(),
    log:
        "logs/figures/baselines.log",
    conda:
        CPU_ENV
    script:
        "../scripts/baseline_table.py"


EXPERIMENT_REGISTRY.declare(
    "baselines",
    # not part of `all` (the findings do not read it): `snakemake baseline_table` runs it; the plan sizes it
    on_demand=lambda: ["baseline_table"],
    plan={"baseline": Estimator("gna.plan.job_estimates:baseline_task")},
)
