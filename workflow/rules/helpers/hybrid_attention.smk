# Helpers of the rules in workflow/rules/hybrid_attention.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def hybrid_attention_files(m):
    """The model's results, in config order: k = 0 once (the unmodified model: top-k removal's
    k0 where that experiment runs it with the same tasks, else its own), then per mode each k."""
    settings = experiment_config("hybrid_attention")
    ks = settings.get("k_by_model", {}).get(m, settings["k"])
    files = []
    if 0 in ks:
        shared = m in experiment_models("topk_removal") and 0 in k_values("topk_removal", m)
        first = settings["modes"][0]
        files.append(f"results/topk_removal/{m}/k0.csv" if shared else f"results/hybrid_attention/{m}/{first}-k0.csv")
    files += [f"results/hybrid_attention/{m}/{mode}-k{k}.csv" for mode in settings["modes"]
              for k in ks if k != 0]
    return files
