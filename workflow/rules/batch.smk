# Fewer, fuller processes at small scale (config batch_conditions): a job that runs a model spends
# ~4 s importing torch, transformers and lm-eval before work that takes ~1-2 s on the micro models.
# With batch_conditions != 1, the conditions of one evaluation rule and one model (up to
# batch_conditions of them; 0: all) run in one job, rule `batch`: it runs the rule's own script once
# per condition, in one process, with that condition's params, input, output and log, computed
# from the rule itself (its params and inputs stay the one definition; gna.condition_batches). Output names
# are the rule's, so every consumer is unchanged. With 1 (the default; the paper preset) no batch
# rule exists and the DAG is one job per condition.

from gna.jobs import condition_batches as batches

BATCH_CONDITIONS = config["batch_conditions"]
# Evaluation rules whose conditions are batched: one model, several conditions. Not evaluate_hybrid:
# each of its conditions waits for its own student, and one job for all would wait for the last one.
BATCHED_RULES = ["gradual_pruning", "individual_pruning", "topk_removal", "kv_pairs", "head_keeping",
                 "ssm_masking", "hybrid_attention", "layer_swap"]
# The conditions this study needs: the files the consumers list (their fixed inputs, so a consumer's
# edit carries over), plus the per-model lists of pruning and top-k, whose consumers take them by
# wildcard.
BATCH_CANDIDATES = (
    [f"results/pruning/{m}/{kind}{i}.csv" for m in experiment_models("layer_pruning")
     for kind, first in (("gradual/depth", 1), ("individual/layer", 0)) for i in range(first, n_layers(m) + first)]
    + [f for e in ("topk_removal", "arc_chat") for files in topk_outputs(e).values() for f in files]
    + [str(f) for r in workflow.rules for f in r.input if isinstance(f, str) and "{" not in f]
)


for _i, (_rule, _files) in enumerate(batches.condition_batches(workflow, BATCHED_RULES, BATCH_CANDIDATES,
                                                               BATCH_CONDITIONS)):
    _jobs = [batches.condition_job(workflow, getattr(rules, _rule), _rule, f, THREADS, config) for f in _files]

    rule batch:
        name:
            f"batch_{_rule}_{_i}"
        input:
            sorted({f for j in _jobs for _, v in j["input"] for f in ([v] if isinstance(v, str) else v)}),
        output:
            _files,
        params:
            jobs=_jobs,
        threads: THREADS
        resources:
            **MODEL_RESOURCES,
        log:
            [log for j in _jobs for log in j["log"]],
        conda:
            MODEL_ENV
        script:
            "../scripts/batch.py"

    workflow.ruleorder(f"batch_{_rule}_{_i}", _rule)
