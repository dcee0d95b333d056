# Models that the pipeline builds itself: random-init tiny ones (smoke tests, benchmarks).


rule random_model:
    output:
        directory("results/models/{model}"),
    wildcard_constraints:
        model=name_pattern([m for m, entry in config["models"].items() if "random" in entry]),
    params:
        spec=lambda wc: dict(sorted(config["models"][wc.model]["random"].items())),
        seed=config["seed"],
    log:
        "logs/models/{model}.random.log",
    conda:
        CPU_ENV
    script:
        "../scripts/random_model.py"
