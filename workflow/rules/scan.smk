# Head ranking by single-head ablation on KV retrieval (paper section 5), and the G&A roles
# of the top heads read off their token-mixing patterns. scan.method: exact (every head, the
# paper's), atp or atp+exact (attribution patching, then the top candidates exactly).


rule head_scan:
    input:
        model=lambda wc: model_input(wc.model),
        probe=lambda wc: scan_probe(wc.scan_dir, wc.model),
    output:
        ranking="results/{scan_dir}/{model}.ranking.csv",
        ga="results/{scan_dir}/{model}.ga.csv",
    wildcard_constraints:
        scan_dir="scan|scan_distill|scan_fast",
    params:
        spec=lambda wc: model_spec(wc.model),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
        classify_top=config["scan"]["classify_top"],
        classify_examples=config["scan"]["classify_examples"],
        threshold=config["scan"]["threshold"],
        probe_check=config["scan"]["probe_check"],
        method=lambda wc: "atp+exact" if wc.scan_dir == "scan_fast" else scan_method(wc.model),
        atp={k: config["scan"][k] for k in ("candidates", "guard_sample", "guard_k", "guard_level", "atp_score")}
        | {"graddrop": config["scan"]["atp_graddrop"], "seed": config["kv_probe"]["seed"]},
        # only where set: a study without the key keeps its params, so its scans do not rerun
        **({"shared_prefix": True} if config["scan"].get("shared_prefix") else {}),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/{scan_dir}/{model}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/head_scan.py"


# The fast scan held to the exact one on a real model (scan.check_models, ranked exactly): atp+exact on
# the same probe into results/scan_fast/, and how many of the exact top k it finds (gna.scan.agreement).
rule scan_agreement:
    input:
        exact=expand("results/scan/{model}.ranking.csv", model=config["scan"]["check_models"]),
        fast=expand("results/scan_fast/{model}.ranking.csv", model=config["scan"]["check_models"]),
    output:
        csv=f"{FIGURES}/scan_agreement.csv",
        md=report(f"{FIGURES}/scan_agreement.md", caption="../report/scan_agreement.rst", category="Head ranking"),
    params:
        models=config["scan"]["check_models"],
    log:
        "logs/figures/scan_agreement.log",
    conda:
        CPU_ENV
    script:
        "../scripts/scan_agreement.py"


rule head_ranking_figure:
    input:
        rankings=expand("results/scan/{model}.ranking.csv", model=SCAN_MODELS),
        ga=expand("results/scan/{model}.ga.csv", model=SCAN_MODELS),
    output:
        png=report(f"{FIGURES}/head_ranking.png", caption="../report/head_ranking.rst", category="Head ranking"),
        pdf=f"{FIGURES}/head_ranking.pdf",
        md=f"{FIGURES}/head_ranking.md",
        csv=f"{FIGURES}/head_ranking.csv",
    params:
        models=SCAN_MODELS,
        paper_keys=paper_keys(SCAN_MODELS),
    log:
        "logs/figures/head_ranking.log",
    conda:
        CPU_ENV
    script:
        "../scripts/head_ranking_figure.py"


rule ga_heatmaps:
    input:
        models=[m for name in experiment_models("heatmaps") for m in model_input(name)],
        ga=expand("results/scan/{model}.ga.csv", model=experiment_models("heatmaps")),
        probe=probe_path(),
    output:
        png=report(f"{FIGURES}/ga_heatmaps.png", caption="../report/ga_heatmaps.rst", category="Heads"),
        pdf=f"{FIGURES}/ga_heatmaps.pdf",
    params:
        specs={name: model_spec(name) for name in experiment_models("heatmaps")},
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/figures/ga_heatmaps.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/ga_heatmaps.py"


# The head explorer: per scanned model one self-contained HTML page (ranking table, the top heads'
# mixing patterns on several probe prompts, the other scanned models beside it); gna.report.explorer.
rule head_patterns:
    input:
        model=lambda wc: model_input(wc.model),
        probe=lambda wc: scan_probe("scan", wc.model),
        ranking="results/scan/{model}.ranking.csv",
        ga="results/scan/{model}.ga.csv",
    output:
        "results/scan/{model}.patterns.json",
    params:
        spec=lambda wc: model_spec(wc.model),
        prompts=EXPLORER_PROMPTS,
        top=EXPLORER_TOP,
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/scan/{model}.patterns.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/head_patterns.py"


rule head_explorer:
    input:
        own="results/scan/{model}.patterns.json",
        others=lambda wc: expand("results/scan/{m}.patterns.json", m=[m for m in SCAN_MODELS if m != wc.model]),
    output:
        # in figures/ (git's): the report links the pages before a run too, as it does the figures
        report(f"{FIGURES}/explorer/{{model}}.html", caption="../report/head_explorer.rst", category="Head explorer",
               labels={"model": "{model}"}),
    log:
        "logs/figures/explorer/{model}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/head_explorer.py"


# The scan is part of every study (the head experiments read its ranking); the heatmaps are the
# experiment `heatmaps`.
EXPERIMENT_REGISTRY.declare(
    "scan",
    always=True,
    targets=lambda: (expand("results/scan/{model}.ranking.csv", model=SCAN_MODELS)
                     + expand(f"{FIGURES}/explorer/{{model}}.html", model=SCAN_MODELS)
                     + [f"{FIGURES}/head_ranking.png", f"{FIGURES}/head_ranking.md"]
                     + ([f"{FIGURES}/scan_agreement.md"] if config["scan"]["check_models"] else [])),
    batched={"head_scan": lambda wc: (), "head_patterns": lambda wc: ()},
    # the head explorer takes the other models' patterns by wildcard
    batch_inputs=lambda: [f"results/scan/{m}.patterns.json" for m in SCAN_MODELS],
    plan={"head_scan": Estimator("gna.plan.job_estimates:head_scan"),
          "head_patterns": Estimator("gna.plan.job_estimates:mixing_patterns")},
    findings=[Section(30, "gna.report.findings.head_scan:redundancy")],
)
EXPERIMENT_REGISTRY.declare(
    "heatmaps",
    targets=lambda: [f"{FIGURES}/ga_heatmaps.png"],
    plan={"ga_heatmaps": Estimator("gna.plan.job_estimates:models_loaded", experiment="heatmaps")},
)
