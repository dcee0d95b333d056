# The micro study's own models: retrain them from scratch (`snakemake retrain_micro`).
#
# The shipped checkpoints in data/models/<name> (and the task files in data/micro/tasks) are the
# pipeline's inputs, like pretrained weights at paper scale; these rules rebuild them under
# results/micro/ and compare the rebuilt bytes with the shipped ones. Reads config["micro"]:
#   micro.world                  WorldConfig overrides (gna.micro.world), shared by the tasks and every model
#   micro.shipped_dir            where the shipped checkpoints are (default data/models)
#   micro.shipped_data           where the shipped task files are (default data/micro/tasks)
#   micro.models.<name>.family   llama | mamba2 | mamba1 | zamba2
#   micro.models.<name>.seed     model init and corpus seed (default: the top-level seed)
#   micro.models.<name>.model    transformers config overrides on top of the family preset
#   micro.models.<name>.train    TrainConfig overrides on top of the family's recipe
#                                (gna.micro.recipes.FAMILY_PRESETS); world/corpus merged by key


from gna.config.schema import defaults_of

# Validated (common.smk): the schema's defaults are in. A study without micro retrains nothing, and
# compares nothing with the shipped models where the defaults put them. (Included on its own, as in
# the tests, this file reads a config that is not validated: it spells out every key read here.)
MICRO = config["micro"] if "micro" in config else defaults_of("micro")
MICRO_MODEL_CFG = MICRO["models"]
MICRO_MODELS = sorted(MICRO_MODEL_CFG)
# Resolved against the repository when --directory points elsewhere (common.smk's shipped_path;
# this file is also included on its own, as in the tests: then without common.smk's helpers).
_shipped = globals().get("shipped_path", str)
_CPU_ENV = globals().get("CPU_ENV", "../../envs/cpu.yaml")


rule micro_tasks:
    output:
        directory("results/micro/data"),
    params:
        world=MICRO["world"],
    log:
        "logs/micro/tasks.log",
    conda:
        _CPU_ENV
    script:
        "../scripts/micro_tasks.py"


rule train_micro_model:
    output:
        directory("results/micro/models/{model}"),
    wildcard_constraints:
        model="|".join(MICRO_MODELS) if MICRO_MODELS else "^$",
    params:
        family=lambda wc: MICRO_MODEL_CFG[wc.model]["family"],
        seed=lambda wc: int(MICRO_MODEL_CFG[wc.model].get("seed", config["seed"])),
        model=lambda wc: MICRO_MODEL_CFG[wc.model].get("model", {}),
        train=lambda wc: MICRO_MODEL_CFG[wc.model].get("train", {}),
        world=MICRO["world"],
    threads: 1
    log:
        "logs/micro/train/{model}.log",
    conda:
        _CPU_ENV
    script:
        "../scripts/train_micro_model.py"


rule compare_micro_models:
    input:
        retrained=expand("results/micro/models/{model}", model=MICRO_MODELS),
        data="results/micro/data",
    output:
        md="results/micro/compare.md",
        json="results/micro/compare.json",
    params:
        models=MICRO_MODELS,
        shipped_dir=_shipped(MICRO["shipped_dir"]),
        shipped_data=_shipped(MICRO["shipped_data"]),
    log:
        "logs/micro/compare.log",
    conda:
        _CPU_ENV
    script:
        "../scripts/compare_micro_models.py"


rule retrain_micro:
    input:
        expand("results/micro/models/{model}", model=MICRO_MODELS),
        "results/micro/data",
        "results/micro/compare.md",
