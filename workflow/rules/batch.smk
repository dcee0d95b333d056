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
#
# Included after every rule file, as `rule all` comes after them: it batches the rules the experiments
# declare (gna.experiments.registry), with the consumers' fixed inputs.
from gna.jobs import condition_batches as batches

BATCH_CONDITIONS = config["batch_conditions"]


# The batched rules, each with the key that keeps its conditions apart (wildcards -> a tuple; one
# batch per key, see above), as their rule files declare them.
BATCHED_RULES = EXPERIMENT_REGISTRY.batched()
# Those whose conditions share work when evaluated together (gna.experiments.shared_conditions: the
# layers a condition leaves unchanged run once): batched by their own key (per model) even with
# batch_conditions 1.
SHARED_RULES = EXPERIMENT_REGISTRY.shared()
# What a batch asks of the scheduler: its rule's own threads and resources, and what a profile sets for
# that rule (`set-resources`: a cluster's partition, memory; its runtime times the batch's conditions,
# each at most its own job's time), since a profile cannot name a batch, whose name the DAG makes.
BATCH_LAUNCH = EXPERIMENT_REGISTRY.launch()
PROFILE_RESOURCES = workflow.resource_settings.overwrite_resources
# The conditions this study needs: the files the consumers list (their fixed inputs, so a consumer's
# edit carries over), plus the outputs the experiments' consumers take by wildcard.
BATCH_CANDIDATES = (EXPERIMENT_REGISTRY.batch_inputs()
                    + [str(f) for r in workflow.rules for f in r.input if isinstance(f, str) and "{" not in f])


for _i, (_rule, _files) in enumerate(batches.condition_batches(workflow, BATCHED_RULES, BATCH_CANDIDATES,
                                                               BATCH_CONDITIONS, SHARED_RULES)):
    _threads, _resources = BATCH_LAUNCH.get(_rule, (THREADS, MODEL_RESOURCES))
    _jobs = [batches.condition_job(workflow, getattr(rules, _rule), _rule, f, _threads, config) for f in _files]
    _resources = {**_resources, **batches.profile_resources(PROFILE_RESOURCES.get(_rule, {}), len(_jobs))}
    if BATCH_CONDITIONS == 1:  # batched only to share work: the plan counts its conditions
        EXPERIMENT_REGISTRY.shared_batches[f"batch_{_rule}_{_i}"] = (_rule, [dict(j["wildcards"]) for j in _jobs])

    rule batch:
        name:
            f"batch_{_rule}_{_i}"
        input:
            sorted({f for j in _jobs for _, v in j["input"] for f in ([v] if isinstance(v, str) else v)}),
        output:
            batches.batch_outputs(workflow, _rule, _jobs),
        params:
            jobs=_jobs,
            shared=_rule in SHARED_RULES,
            # the conditions' scripts by content: batch.py is this rule's script, so without it an
            # edited condition script would leave its results standing
            scripts=batches.script_digests(_jobs),
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
