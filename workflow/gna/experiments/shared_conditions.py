"""Conditions of one rule whose evaluations share work: planned one by one, evaluated together.

A rule's script that can share (Fig. 2's depths, Fig. 3's removals, top-k removals) defines
``plan(snakemake, log)``: what its condition evaluates, an :class:`Evaluation` (or None where the
script wrote its output itself, e.g. a layer beyond the minimal model), and ends with
``if __name__ == "__main__": run_one(snakemake, plan)``. A batch of such conditions
(:func:`run_shared`, the batch job of workflow/scripts/batch.py) plans each, evaluates
those of one model, task list and settings together (:func:`gna.experiments.run.condition_rows`:
the layers a condition leaves unchanged run once per request batch), and has each condition write
its own output from its rows: the rows its own job writes.
"""
from __future__ import annotations

import json
import logging
import runpy
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import pandas as pd


@dataclass
class Evaluation:
    """One condition's evaluation (``evaluation_rows``' arguments) and what it does with the rows and its
    per-question answers (``finish(rows, answers)``; answers: :func:`gna.experiments.run.write_answers`' list)."""

    spec: dict
    tasks: list
    interventions: list
    eval: dict
    micro_data: str | None
    fields: dict
    finish: Callable[[pd.DataFrame, list], None]

    def key(self) -> str:
        """Conditions of equal keys evaluate together: the same model, tasks and settings."""
        return json.dumps([self.spec, list(self.tasks), self.eval, self.micro_data], sort_keys=True, default=str)


def run_one(snakemake, plan) -> None:
    """A shared rule's own job: its one condition, planned and evaluated."""
    from .run import evaluation_rows
    from ..jobs.script_job import job

    with job(snakemake) as log:
        ev = plan(snakemake, log)
        if ev is not None:
            answers: list = []
            rows = evaluation_rows(ev.spec, ev.tasks, ev.interventions, ev.eval, ev.micro_data, ev.fields,
                                   answers=answers)
            ev.finish(rows, answers)


@contextmanager
def _appending(path: str | None) -> Iterator[logging.Logger]:
    """Logging appended to a condition's log (its plan already wrote there)."""
    stream = open(path, "a", buffering=1) if path else sys.stderr
    old = sys.stderr
    sys.stderr = stream
    logging.basicConfig(stream=stream, level=logging.INFO, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        yield logging.getLogger("gna.shared_conditions")
    finally:
        sys.stderr = old
        if path:
            stream.close()


def run_shared(jobs: list[dict], objects: list) -> None:
    """Plan every condition (``jobs``: the batch's, ``objects``: their ``snakemake`` stand-ins), then
    evaluate each group of equal :meth:`Evaluation.key` together and finish each condition."""
    from .run import condition_rows
    from ..jobs.script_job import job

    planned: dict[str, list[tuple[dict, Evaluation]]] = {}
    for j, obj in zip(jobs, objects):
        plan = runpy.run_path(j["script"], run_name="gna_plan", init_globals={"snakemake": obj})["plan"]
        with job(obj) as log:
            ev = plan(obj, log)
        if ev is not None:
            planned.setdefault(ev.key(), []).append((j, ev))
    for group in planned.values():
        logs = [j["log"][0] if j["log"] else None for j, _ in group]
        with _appending(logs[0]) as log:
            log.info("evaluated with %d other condition(s) of this batch, the unchanged layers once: %s",
                     len(group) - 1, ", ".join(j["output"][0] for j, _ in group[1:]) or "none")
            first, answers = group[0][1], []
            rows = condition_rows(first.spec, first.tasks, [ev.interventions for _, ev in group], first.eval,
                                  first.micro_data, [ev.fields for _, ev in group], answers=answers)
        for (j, ev), r, a, path in zip(group, rows, answers, logs):   # one answers table per condition
            with _appending(path):
                ev.finish(r, [a])


def run_shared_batch(snakemake) -> None:
    """The batch job of a shared rule (workflow/scripts/batch.py): :func:`run_shared` over its
    conditions, ending as :func:`gna.jobs.condition_batches.run_conditions` does."""
    from ..jobs.condition_batches import condition_object
    from ..jobs.script_job import end_script_job, exit_with_user_error, resuming_job, user_failure

    jobs = list(snakemake.params.jobs)
    try:
        # the shared evaluation keeps its finished units beside the batch's first output, keyed by
        # the batch job (its conditions are in its params), apart from its first condition's own
        # state (the same first output): a stopped batch resumes from them
        with resuming_job(snakemake, suffix=".batch"):
            run_shared(jobs, [condition_object(j, snakemake.threads, snakemake.config) for j in jobs])
    except BaseException as e:  # as a condition's own job: the user's error in one line, the traceback in its log
        if not user_failure(snakemake, e):
            raise
        logs = [j["log"][0] for j in jobs if j["log"]]
        exit_with_user_error(f"{jobs[0]['rule']} (batch {snakemake.rule})", e, logs[0] if logs else None)
    end_script_job(snakemake)
