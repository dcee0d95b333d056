# Helpers of the rules in workflow/rules/head_keeping.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def keeping_sources(model):
    """Table 1's head sources of a model: heads named in the config (the paper's), the heads
    discovered by ablating each head of the critical layers alone on MMLU, and (head_keeping.scan_heads)
    the KV scan's top Gather and top Aggregate-pattern heads."""
    keeping = experiment_config("head_keeping")
    return ((["named"] if model in keeping.get("named_heads", {}) else []) + ["discovered"]
            + (["scan"] if keeping["scan_heads"] else []))
