# The fast scan's validation models (>= 128 heads each; gna.micro.validation_models, docs/fast-scan.md):
# `snakemake retrain_validation_models` retrains them from scratch into results/validation/models/
# with the micro recipe's retrieval phase. The study itself never reads them; the recall benchmark
# (benchmarks/atp_recall.py) reads them from data/models/<name>.
from gna.micro.validation_models import VALIDATION_MODELS

_VAL_CPU_ENV = globals().get("CPU_ENV", "../../envs/cpu.yaml")


rule train_validation_model:
    output:
        directory("results/validation/models/{vmodel}"),
    wildcard_constraints:
        vmodel="|".join(VALIDATION_MODELS),
    params:
        spec=lambda wc: VALIDATION_MODELS[wc.vmodel],
    threads: 1
    log:
        "logs/validation/train/{vmodel}.log",
    conda:
        _VAL_CPU_ENV
    script:
        "../scripts/train_validation_model.py"


rule retrain_validation_models:
    input:
        expand("results/validation/models/{vmodel}", vmodel=sorted(VALIDATION_MODELS)),
