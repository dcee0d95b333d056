# Fewer, fuller processes at small scale (config batch_conditions): a job that runs a model spends
# ~4-5 s importing torch, transformers and lm-eval, before work that takes seconds on the micro models.
# With batch_conditions != 1, the conditions of one rule (up to batch_conditions of them; 0: all)
# run in one job, rule `batch`: it runs the rule's own script once per condition, in one process,
# with that condition's params, input, output and log, computed from the rule itself (its params and
# inputs stay the one definition; gna.jobs.condition_batches). Output names are the rule's, so every
# consumer is unchanged. With 1 (the default; the paper preset) no batch rule exists and the DAG is
# one job per condition.
#
# A batch holds one rule's conditions across models (each condition loads its own model, so its
# output has the same bytes as its own job's): a change to one model reruns that rule's batch for
# every model, which at micro scale costs less than the imports the batch saves. Conditions one of
# which reads another's output never share a batch: a distillation stage's batch holds one stage of
# one state size (stage 3 reads stage 2), and a student's evaluation waits only for the students of
# its own state size.
from gna.hybrid.study.variants import parse_variant
from gna.jobs import condition_batches as batches

BATCH_CONDITIONS = config["batch_conditions"]


# The batched rules, each with the key that keeps its conditions apart (wildcards -> a tuple; one
# batch per key, see above). The distillation's stages only where a stage is one process
# (gpus_per_stage x nodes = 1): on ranks, each stage is its own launch.
BATCHED_RULES = {
    **{name: (lambda wc: ()) for name in ("gradual_pruning", "individual_pruning", "topk_removal", "kv_pairs",
                                            "head_keeping", "ssm_masking", "hybrid_attention", "layer_swap",
                                            "head_patterns", "export_mc_task", "row_sweep", "ranking_seed_scan",
                                            "head_scan", "head_pairs")},
    **({"distill_matrices": lambda wc: (), "distill_stage": lambda wc: (wc["teacher"], wc["state"], wc["stage"])}
       if DISTILL and DISTILL_GPUS * DISTILL_NODES == 1 else {}),
    # a student's state size from its name; the teacher alone
    **({"evaluate_hybrid": lambda wc: (wc["teacher"], wc["variant"] if wc["variant"] == "teacher"
                                       else parse_variant(wc["variant"]).state)}
       if DISTILL else {}),
}
# What a batch asks of the scheduler: its rule's own threads and resources.
BATCH_LAUNCH = {rule: (DISTILL_THREADS, DISTILL_LAUNCH) for rule in ("distill_matrices", "distill_stage")}
# The conditions this study needs: the files the consumers list (their fixed inputs, so a consumer's
# edit carries over), plus the per-model lists of pruning and top-k, the distillation stages, the
# head patterns and the seed rankings, whose consumers take them by wildcard.
BATCH_CANDIDATES = (
    [f"results/pruning/{m}/{kind}{i}.csv" for m in experiment_models("layer_pruning")
     for kind, first in (("gradual/depth", 1), ("individual/layer", 0)) for i in range(first, n_layers(m) + first)]
    + [f for e in ("topk_removal", "arc_chat") for files in topk_outputs(e).values() for f in files]
    + [str(f) for r in workflow.rules for f in r.input if isinstance(f, str) and "{" not in f]
    + [f"results/hybrid/{DISTILL['teacher']}/{v}/stage{stage}" for v in DISTILL_VARIANTS for stage in (2, 3)
       if DISTILL]
    + [f"results/hybrid/{DISTILL['teacher']}/s{s}/stage1"
       for s in dict.fromkeys(parse_variant(v).state for v in DISTILL_VARIANTS) if DISTILL]
    + [f"results/scan/{m}.patterns.json" for m in SCAN_MODELS]
    + [seed_ranking(m, s) for m in experiment_models("ranking_seeds") for s in RANKING_SEEDS.get("seeds") or []]
)


for _i, (_rule, _files) in enumerate(batches.condition_batches(workflow, BATCHED_RULES, BATCH_CANDIDATES,
                                                               BATCH_CONDITIONS)):
    _threads, _resources = BATCH_LAUNCH.get(_rule, (THREADS, MODEL_RESOURCES))
    _jobs = [batches.condition_job(workflow, getattr(rules, _rule), _rule, f, _threads, config) for f in _files]

    rule batch:
        name:
            f"batch_{_rule}_{_i}"
        input:
            sorted({f for j in _jobs for _, v in j["input"] for f in ([v] if isinstance(v, str) else v)}),
        output:
            batches.batch_outputs(workflow, _rule, _jobs),
        params:
            jobs=_jobs,
        priority: workflow.get_rule(_rule).priority
        threads: _threads
        resources:
            **_resources,
        log:
            [log for j in _jobs for log in j["log"]],
        conda:
            MODEL_ENV
        script:
            "../scripts/batch.py"

    workflow.ruleorder(f"batch_{_rule}_{_i}", _rule)
