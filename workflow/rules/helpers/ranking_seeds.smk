# Helpers of the rules in workflow/rules/ranking_seeds.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def seed_ranking(model, seed):
    """A model's ranking on the probe of ``seed``: the scan's own for kv_probe.seed, else ranking_seed_scan's."""
    if seed == config["kv_probe"]["seed"]:
        return f"results/scan/{model}.ranking.csv"
    return f"results/questions/seeds/{model}/s{seed}.ranking.csv"
