# The unmodified models on every benchmark (gna.experiments.baselines; docs/benchmarks.md): one job per
# (model, task), so each has its own CPU time and resumes on its own, then one table.
#
#   snakemake --cores 1 baseline_table     # figures/<study>/baselines.md and .csv
#
# Tasks: benchmarks.suite's (<task>_local, sized by experiments.baselines.size where set, else benchmarks.suite.size), the local MMLU letter task
# (benchmarks.mmlu's sample) and the KV probe of experiments.baselines.kv_pairs pairs (each model's
# kv_values, kv_probe's format, seed and examples: the probe the scan ranks on at the scan's n_pairs).
from gna.experiments.baselines import sizes_note as baseline_sizes_note
from gna.experiments.baselines import sources as baseline_sources
from gna.experiments.baselines import suite_size as baseline_suite_size

BASELINES = experiment_config("baselines")
BASELINE_DIR = "results/baselines"
BASELINE_SOURCES = baseline_sources(config, BASELINES, LOCAL_MMLU_TASKS[0], BASELINES.get("kv_pairs"))
# the baselines' own samples of the suite (experiments.baselines.size), built apart from the study's
# (rule local_suite builds them in their own folder)
BASELINE_SUITE_SIZE = baseline_suite_size(config, BASELINES) if BASELINES else None
BASELINE_SUITE_DIR = LOCAL_SUITE_DIR if BASELINE_SUITE_SIZE is None else BASELINE_SUITE_TASKS


rule baseline:
    input:
        # the KV probe the scan ranks on, the local MMLU sample, or the suite's built tasks
        unpack(lambda wc: {"kv": lambda: {"probe": probe_path(BASELINES["kv_pairs"], model=wc.model)},
                           "mmlu": lambda: {"sample": rules.local_mmlu.output.sample},
                           "suite": lambda: {"manifest": f"{BASELINE_SUITE_DIR}/manifest.json"}}[BASELINE_SOURCES[wc.task]]()),
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
        rows=[f"{BASELINE_DIR}/{m}/{t}.csv" for m in experiment_models("baselines") for t in BASELINE_SOURCES],
        costs=[f"{BASELINE_DIR}/{m}/{t}.cost.json" for m in experiment_models("baselines") for t in BASELINE_SOURCES],
    output:
        md=f"{FIGURES}/baselines.md",
        csv=f"{FIGURES}/baselines.csv",
    params:
        sizes_note=baseline_sizes_note(config, BASELINE_SOURCES, BASELINES.get("kv_pairs"), BASELINES),
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
