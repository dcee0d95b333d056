# An open question of the paper (gna.questions; docs/open-questions.md): a ranking as
# goombalab/mohawk's inputs (its architecture YAML and head map).


MOHAWK_EXPORT = experiment_config("mohawk_export")


rule mohawk_export:
    # A ranking's top k as goombalab/mohawk's architecture_<k>.yaml and --heads map (gna export).
    input:
        ranking=lambda wc: MOHAWK_EXPORT["ranking"].format(model=wc.model),
    output:
        yaml="results/questions/mohawk/{model}/architecture_{k}.yaml",
        heads="results/questions/mohawk/{model}/heads_{k}.txt",
    wildcard_constraints:
        k=r"\d+",
    params:
        n_layers=lambda wc: n_layers(wc.model),
        source=lambda wc: model_source(wc.model),
        head_dim=MOHAWK_EXPORT.get("head_dim"),
    log:
        "logs/questions/mohawk/{model}/architecture_{k}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/mohawk_export.py"


EXPERIMENT_REGISTRY.declare(
    "mohawk_export",
    targets=lambda: [f"results/questions/mohawk/{m}/{name}_{k}.{ext}" for m in MOHAWK_EXPORT["models"]
                     for k in MOHAWK_EXPORT["k"] for name, ext in (("architecture", "yaml"), ("heads", "txt"))],
)
