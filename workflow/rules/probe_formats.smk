# An open question of the paper (gna.questions; docs/open-questions.md): which heads
# are format-sensitive? The scan repeated on probes of other formats.


PROBE_FORMATS = experiment_config("probe_formats")


rule format_probes:
    # One KV retrieval in every format of probe_formats.formats, on the same keys, values and queries;
    # {values_tag}: the value rule's part of the names ("" for the paper's 0-99; the script reads it)
    output:
        [format_probe(f, "{values_tag}") for f in PROBE_FORMATS.get("formats", [])],
    wildcard_constraints:
        values_tag="|".join(re.escape(rule_tag(r)) for r in VALUE_RULES),
    params:
        formats=PROBE_FORMATS.get("formats"),
        key_pool=PROBE_FORMATS.get("keys"),
        n_options=PROBE_FORMATS.get("n_options"),
        n_pairs=config["scan"]["n_pairs"],
        n_examples=PROBE_FORMATS.get("n_examples") or config["kv_probe"]["n_examples"],
        seed=config["kv_probe"]["seed"],
        separator=config["kv_probe"]["separator"],
    log:
        "logs/probes/formats{values_tag}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/format_probes.py"


rule format_scan:
    # The scan under every format; the rank correlations and the ranking across formats.
    input:
        model=lambda wc: model_input(wc.model),
        probes=lambda wc: [format_probe(f, model_rule_tag(wc.model)) for f in PROBE_FORMATS.get("formats", [])],
    output:
        rankings="results/questions/formats/{model}.rankings.csv",
        ranking="results/questions/formats/{model}.ranking.csv",
    params:
        spec=lambda wc: model_spec(wc.model),
        formats=PROBE_FORMATS.get("formats"),
        top_k=PROBE_FORMATS.get("top_k"),
        above_chance=PROBE_FORMATS.get("above_chance"),
        batch_size=config["scan"]["batch_size"],
        max_rows=config["scan"]["max_rows"],
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/questions/formats/{model}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/format_scan.py"


rule probe_formats_figure:
    input:
        rankings=expand("results/questions/formats/{model}.rankings.csv", model=experiment_models("probe_formats")),
        across=expand("results/questions/formats/{model}.ranking.csv", model=experiment_models("probe_formats")),
    output:
        png=report(f"{FIGURES}/probe_formats.png", caption="../report/probe_formats.rst", category="Open questions"),
        pdf=f"{FIGURES}/probe_formats.pdf",
        md=f"{FIGURES}/probe_formats.md",
        csv=f"{FIGURES}/probe_formats.csv",
    params:
        top_k=PROBE_FORMATS.get("top_k"),
    log:
        "logs/figures/probe_formats.log",
    conda:
        CPU_ENV
    script:
        "../scripts/probe_formats_figure.py"


EXPERIMENT_REGISTRY.declare(
    "probe_formats",
    targets=lambda: [f"{FIGURES}/probe_formats.png", f"{FIGURES}/probe_formats.md"],
    plan={"format_scan": Estimator("gna.plan.question_rows:format_scans", experiment="probe_formats")},
)
