"""Several conditions of one rule in one process (rule ``batch``, workflow/rules/batch.smk).

At micro scale a job's imports (torch, transformers, lm-eval: ~4 s) outweigh its work (~1-2 s).
The batch job runs the rule's own script once per condition, each with a stand-in for Snakemake's
``snakemake`` object holding that condition's params, input, output, log and wildcards, exactly as
the rule's own job would get them. Each condition loads its model and seeds as its own job does,
so its output has the same bytes."""
from __future__ import annotations

import os
import runpy
import sys
from types import SimpleNamespace


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
    return SimpleNamespace(rule=job["rule"], input=inputs, output=OutputFiles(job["output"]), log=Log(job["log"]),
                           params=Params(fromdict=job["params"]), wildcards=Wildcards(fromdict=job["wildcards"]),
                           threads=threads, config=config)


def run_conditions(snakemake) -> None:
    """Run every condition of the batch, in order; then end the process as a script job does
    (gna.pipeline.job: no interpreter teardown)."""
    from .pipeline import _is_script_job

    for job in snakemake.params.jobs:
        runpy.run_path(job["script"], run_name="__main__",
                       init_globals={"snakemake": condition_object(job, snakemake.threads, snakemake.config)})
    if _is_script_job(snakemake):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
