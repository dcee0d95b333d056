# Helpers of the rules in workflow/rules/kv_pairs.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def kv_pairs_seeds():
    """Fig. 4's probe seeds (kv_pairs.probe_seeds)."""
    return other_probe_seeds(experiment_config("kv_pairs").get("probe_seeds"))
