# Helpers shared by the rules: config validation, model sources, output lists.
import os

from snakemake.utils import validate

# One torch thread per job: two threads on a loaded 2-core machine ran 13-17x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


validate(config, schema="../schemas/config.schema.yaml")


def check_config_references():
    """Cross-field checks the schema cannot express; named errors before any job runs."""
    models = config["models"]
    for name in config["scan"]["models"]:
        if name not in models:
            raise ValueError(f"config error: scan.models names {name!r}, which is not in models "
                             f"({', '.join(sorted(models))})")


check_config_references()

SCAN_MODELS = config["scan"]["models"]
THREADS = config.get("threads_per_job", 1)
GPUS = config.get("gpus_per_job", 0)


def model_source(name):
    """The directory (or HF id) a model is loaded from."""
    m = config["models"][name]
    return f"results/models/{name}" if "random" in m else m["path"]


def model_input(name):
    """Snakemake input for a model: its directory if local (so changes rerun), else nothing."""
    src = model_source(name)
    return [src] if src.startswith("results/") or os.path.isdir(src) else []


def model_spec(name):
    """The ModelSpec fields of a model entry (see gna.models.ModelSpec)."""
    m = config["models"][name]
    spec = {"path": model_source(name), "dtype": config.get("dtype", "float32"),
            "device": config.get("device", "cpu")}
    for key in ("revision", "tokenizer", "family", "attn_implementation", "adapter_options"):
        if key in m:
            spec[key] = m[key]
    return spec


def probe_name(n_pairs):
    p = config["kv_probe"]
    return f"kv-{p['format']}-n{n_pairs}-s{p.get('seed', 0)}"


def all_targets():
    return (expand("results/scan/{model}.ranking.csv", model=SCAN_MODELS)
            + expand("results/scan/{model}.ga.csv", model=SCAN_MODELS)
            + ["figures/head_ranking.png", "figures/head_ranking.md"])
