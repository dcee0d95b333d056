# Inference memory (the talk's table): formula for the paper's configurations, measured caches
# of this study's models.


rule inference_memory:
    input:
        models=[m for name in experiment_models("memory") for m in model_input(name)],
    output:
        csv=f"{FIGURES}/inference_memory.csv",
        md=report(f"{FIGURES}/inference_memory.md", caption="../report/inference_memory.rst", category="Memory"),
        micro_csv=f"{FIGURES}/inference_memory_measured.csv",
        micro_md=f"{FIGURES}/inference_memory_measured.md",
    params:
        specs={name: model_spec(name) for name in experiment_models("memory")},
    log:
        "logs/figures/inference_memory.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/inference_memory.py"


EXPERIMENT_REGISTRY.declare(
    "memory",
    targets=lambda: [f"{FIGURES}/inference_memory.md"],
    findings=[Section(40, "gna.report.findings.inference_memory:memory")],
)
