"""Several conditions of one rule in one process (rule ``batch``, workflow/rules/batch.smk).

At micro scale a job's imports (torch, transformers, lm-eval: ~4-5 s) outweigh much of its work.
The batch job runs the rule's own script once per condition, each with a stand-in for Snakemake's
``snakemake`` object holding that condition's params, input, output, log and wildcards, exactly as
the rule's own job would get them. Each condition loads its model and seeds as its own job does,
so its output has the same bytes.

Parse time (the workflow's side): :func:`condition_batches` groups the conditions, and
:func:`condition_job` computes what each one's job would get, from the rule itself."""
from __future__ import annotations

import inspect
import os
import runpy
from types import SimpleNamespace
from typing import Callable


def condition_batches(workflow, rule_keys: dict[str, Callable[[dict], tuple]], candidates: list[str],
                      size: int, shared: dict[str, Callable[[dict], tuple]] | None = None) -> list[tuple[str, list]]:
    """[(rule, [condition outputs])]: for each rule, the ``candidates`` it makes, grouped by
    ``rule_keys[rule](wildcards)`` (conditions of one key share a job; a key must keep apart the
    conditions one of which reads another's output) in chunks of ``size`` (0: one chunk per group;
    1: no batches at all, but for the ``shared`` rules, whose conditions share work: grouped by
    ``shared[rule](wildcards)``, one job per group). A condition is named by its first output."""
    from snakemake.io import apply_wildcards

    out = []
    keys = rule_keys if size != 1 else dict(shared or {})
    for name, key in keys.items():
        rule = workflow.get_rule(name)
        groups: dict[tuple, dict[str, None]] = {}
        for c in dict.fromkeys(c for c in candidates if rule.is_producer(c)):
            wc = rule.get_wildcards(c)
            # a condition is named by its first output, whichever of its outputs a consumer lists
            groups.setdefault(tuple(key(wc)), {})[apply_wildcards(str(rule.output[0]), wc)] = None
        for g in map(list, groups.values()):
            per = len(g) if size in (0, 1) else size
            out += [(name, g[i: i + per]) for i in range(0, len(g), per)]
    return out


def batch_outputs(workflow, rule_name: str, jobs: list[dict]) -> list:
    """Every output of the batch's conditions (``condition_job``'s), as the batch rule's outputs: an
    output the rule marks ``directory()`` is one in the batch too (Snakemake refuses a directory
    where it expects a file)."""
    from snakemake.io import directory, is_flagged

    marks = [is_flagged(f, "directory") for f in workflow.get_rule(rule_name).output]
    return [directory(f) if is_dir else f for j in jobs for f, is_dir in zip(j["output"], marks)]


def condition_job(workflow, proxy, rule_name: str, output: str, threads: int, config: dict) -> dict:
    """What rule ``rule_name``'s job for ``output`` (one of its outputs) would get, as plain data:
    wildcards, outputs (names kept), params (as
    Snakemake computes them: functions of the wildcards, and of input/output/threads where they ask;
    strings formatted with the wildcards), input (names kept), log, script. ``proxy``: the
    workflow's ``rules.<rule_name>``."""
    from snakemake.io import apply_wildcards
    from snakemake.iocontainers import Wildcards

    rule = workflow.get_rule(rule_name)
    wc = rule.get_wildcards(output)
    wildcards = Wildcards(fromdict=wc)

    def files(v):
        v = v(wildcards) if callable(v) else v
        return ([apply_wildcards(str(x), wc) for x in v] if isinstance(v, (list, tuple))
                else apply_wildcards(str(v), wc))

    job = {"rule": rule_name, "wildcards": wc, "output": [apply_wildcards(str(x), wc) for x in rule.output],
           "output_names": {name: start for name, (start, _) in rule.output._names.items()}, "params": {},
           "log": [apply_wildcards(str(x), wc) for x in rule.log],
           "input": named_inputs(list(proxy.input), rule.input._names, files),
           "script": os.path.join(workflow.basedir, "workflow", "scripts", os.path.basename(rule.script))}
    seen = condition_object(job, threads, config)  # what a param function may ask for besides wildcards

    def param(v):
        if callable(v):
            extra = list(inspect.signature(v).parameters)[1:]
            return v(wildcards, **{k: getattr(seen, k) for k in extra})
        return apply_wildcards(v, wc) if isinstance(v, str) else v

    job["params"] = {name: param(v) for name, v in proxy.params.items()}
    return job


def script_digests(jobs: list[dict]) -> dict[str, str]:
    """``{script name: sha256 of its bytes}`` of the scripts a batch's conditions run. A batch rule's
    own script is ``batch.py``, so Snakemake's code trigger never sees a condition's script change;
    as a param of the batch, its digest does (the params trigger), and an edited script reruns its
    conditions as their own jobs would."""
    import hashlib

    out = {}
    for path in sorted({j["script"] for j in jobs}):
        with open(path, "rb") as f:
            out[os.path.basename(path)] = hashlib.sha256(f.read()).hexdigest()
    return out


def named_inputs(items: list, names: dict, files) -> list[tuple[str | None, str | list[str]]]:
    """The rule's input as [(name or None, file or [files])]: a name given to a list (``tasks=expand(...)``,
    Snakemake's ``_names[name] = (start, end)``) keeps the whole list; ``files`` resolves one item."""
    spans = {start: (name, end) for name, (start, end) in names.items()}
    out, i = [], 0
    while i < len(items):
        name, end = spans.get(i, (None, None))
        if end is None:
            out.append((name, files(items[i])))
            i += 1
        else:
            resolved = [files(v) for v in items[i:end]]
            out.append((name, [f for r in resolved for f in (r if isinstance(r, list) else [r])]))
            i = end
    return out


def condition_object(job: dict, threads: int, config: dict) -> SimpleNamespace:
    """The ``snakemake`` object a condition's script sees: ``job`` is one entry of the batch rule's
    ``jobs`` param (rule, wildcards, params, input as [(name or None, file or [files])], output, log)."""
    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, Wildcards

    inputs = InputFiles()
    for name, value in job["input"]:
        start = len(inputs)
        inputs.extend(value if isinstance(value, list) else [value])
        if name:
            inputs._set_name(name, start, len(inputs) if isinstance(value, list) else None)
    outputs = OutputFiles(job["output"])
    for name, index in job.get("output_names", {}).items():
        outputs._set_name(name, index)
    return SimpleNamespace(rule=job["rule"], input=inputs, output=outputs, log=Log(job["log"]),
                           params=Params(fromdict=job["params"]), wildcards=Wildcards(fromdict=job["wildcards"]),
                           threads=threads, config=config)


def run_conditions(snakemake) -> None:
    """Run every condition of the batch, in order; then end the process as a script job does
    (gna.jobs.script_job.job: no interpreter teardown)."""
    from .script_job import end_script_job, exit_with_user_error, user_failure

    for job in snakemake.params.jobs:
        try:
            runpy.run_path(job["script"], run_name="__main__",
                           init_globals={"snakemake": condition_object(job, snakemake.threads, snakemake.config)})
        except BaseException as e:  # as a condition's own job: the user's error in one line, the traceback in its log
            if not user_failure(snakemake, e):
                raise
            exit_with_user_error(f"{job['rule']} (batch {snakemake.rule})", e, job["log"][0] if job["log"] else None)
    end_script_job(snakemake)


def profile_resources(of_rule: dict, conditions: int) -> dict:
    """What a profile's ``set-resources`` gives a rule (``of_rule``), for a batch of ``conditions`` of it:
    the same, its ``runtime`` (minutes) times the conditions, each at most its own job's time."""
    # a profile's values reach the workflow as Snakemake's Resource objects: their values as written
    out = {k: getattr(v, "raw", v) for k, v in dict(of_rule).items()}
    if str(out.get("runtime", "")).isdigit():
        out["runtime"] = int(out["runtime"]) * conditions
    return out
