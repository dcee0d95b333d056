# Fewer, fuller processes at small scale (config batch_conditions): a job that runs a model spends
# ~4 s importing torch, transformers and lm-eval before work that takes ~1-2 s on the micro models.
# With batch_conditions != 1, the conditions of one evaluation rule and one model (up to
# batch_conditions of them; 0: all) run in one job, rule `batch`: it runs the rule's own script once
# per condition, in one process, with that condition's params, input, output and log, computed
# here from the rule itself (its params and inputs stay the one definition). Output names are the
# rule's, so every consumer is unchanged. With 1 (the default; the paper preset) no batch rule
# exists and the DAG is one job per condition.

BATCH_CONDITIONS = config["batch_conditions"]


BATCHED_RULES = ["gradual_pruning", "individual_pruning", "topk_removal", "kv_pairs", "head_keeping",
                 "ssm_masking", "hybrid_attention", "layer_swap"]
"""Evaluation rules whose conditions are batched: one model, several conditions. Not evaluate_hybrid:
each of its conditions waits for its own student, and one job for all would wait for the last one."""


def batched_outputs():
    """rule -> the outputs of its conditions this study needs: the files its consumers list (their
    fixed inputs, so a consumer's edit carries over; plus the per-model lists of pruning and top-k,
    whose consumers take them by wildcard)."""
    listed = ([f"results/pruning/{m}/{kind}{i}.csv" for m in experiment_models("layer_pruning")
               for kind, first in (("gradual/depth", 1), ("individual/layer", 0))
               for i in range(first, n_layers(m) + first)]
              + [f for e in ("topk_removal", "arc_chat") for files in topk_outputs(e).values() for f in files]
              + [str(f) for r in workflow.rules for f in r.input if isinstance(f, str) and "{" not in f])
    out = {}
    for name in BATCHED_RULES:
        producer = workflow.get_rule(name)
        out[name] = list(dict.fromkeys(f for f in listed if producer.is_producer(f)))
    return {name: files for name, files in out.items() if files}


def condition_job(rule_name, output):
    """What rule ``rule_name``'s job for ``output`` would get: its wildcards, params, input (names
    kept), log, and script, as plain data (gna.batch.condition_object makes the job's object of it)."""
    import inspect

    from snakemake.io import apply_wildcards
    from snakemake.iocontainers import Wildcards

    from gna.batch import condition_object

    job_rule, proxy = workflow.get_rule(rule_name), getattr(rules, rule_name)
    wc = job_rule.get_wildcards(output)
    wildcards = Wildcards(fromdict=wc)

    def files(v):
        v = v(wildcards) if callable(v) else v
        return ([apply_wildcards(str(x), wc) for x in v] if isinstance(v, (list, tuple))
                else apply_wildcards(str(v), wc))

    names = {i: name for name, (i, _) in job_rule.input._names.items()}
    job = {"rule": rule_name, "wildcards": wc, "output": [output], "params": {},
           "log": [apply_wildcards(str(x), wc) for x in job_rule.log],
           "input": [(names.get(i), files(v)) for i, v in enumerate(proxy.input)],
           "script": os.path.join(workflow.basedir, "workflow", "scripts", os.path.basename(job_rule.script))}
    seen = condition_object(job, THREADS, config)  # what a param function may ask for besides wildcards

    def param(v):
        if callable(v):
            extra = list(inspect.signature(v).parameters)[1:]
            return v(wildcards, **{k: getattr(seen, k) for k in extra})
        return apply_wildcards(v, wc) if isinstance(v, str) else v

    job["params"] = {name: param(v) for name, v in proxy.params.items()}
    return job


def condition_batches():
    """[(rule, [condition outputs])]: per rule, its outputs grouped by model (and experiment) in
    chunks of BATCH_CONDITIONS (0: one chunk)."""
    out = []
    for rule_name, files in batched_outputs().items():
        groups = {}
        for f in files:
            wc = workflow.get_rule(rule_name).get_wildcards(f)
            groups.setdefault((wc.get("experiment"), wc.get("model")), []).append(f)
        size = BATCH_CONDITIONS or max(len(g) for g in groups.values())
        out += [(rule_name, g[i: i + size]) for g in groups.values() for i in range(0, len(g), size)]
    return out


for _i, (_rule, _files) in enumerate(condition_batches() if BATCH_CONDITIONS != 1 else []):
    _jobs = [condition_job(_rule, f) for f in _files]

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
