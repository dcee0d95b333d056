# Helpers of the rules in workflow/rules/topk_removal.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def random_draws(name):
    """Seeds of the random-k control (k random heads of the same kinds), one job per seed and k > 0
    (topk_removal.random_draws; arc_chat has no control)."""
    return list(experiment_config(name).get("random_draws", []))


def topk_kv_probe(experiment, model):
    """The probe set of top-k removal's positive control (topk_removal.kv_control) as (task name, file), or
    None: the scan's n_pairs, kv_probe's format, the first seed after the ranking's (other prompts)."""
    if experiment != "topk_removal" or not experiment_config(experiment).get("kv_control"):
        return None
    n, seed = config["scan"]["n_pairs"], other_probe_seeds(None)[0]
    return probe_task_name(n, seed), probe_path(n, seed, model=model)


def topk_outputs(experiment):
    """Per model, in model order: results/<experiment>/<model>/k<k>.csv for its k values, then the
    random control's k<k>-random<seed>.csv for every k > 0 and seed of random_draws."""
    return {m: [f"results/{experiment}/{m}/k{k}.csv" for k in k_values(experiment, m)]
            + [f"results/{experiment}/{m}/k{k}-random{d}.csv" for k in k_values(experiment, m) if k > 0
               for d in random_draws(experiment)]
            for m in experiment_models(experiment)}
