# Helpers of the rules in workflow/rules/scan.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
# The head explorer's probe prompts per head and top heads shown (besides every Gather and Aggregate head).
EXPLORER_PROMPTS, EXPLORER_TOP = 3, 8


def scan_method(model):
    """The model's scan method: scan.method_by_model's entry, else scan.method."""
    return config["scan"].get("method_by_model", {}).get(model, config["scan"]["method"])


def scan_probe(scan_dir, model):
    """results/scan (and scan_fast, its atp+exact check) ranks on the G&A probe (kv_probe.separator);
    results/scan_distill on the follow-up's (hybrid_distillation.kv_separator), for the distilled teacher."""
    own = scan_dir not in ("scan", "scan_fast")
    return probe_path(separator=experiment_config("hybrid_distillation").get("kv_separator") if own else None,
                      model=model)
