"""What the workflow knows of each experiment, declared beside its rules.

An experiment's rule file (``workflow/rules/<step>.smk``) calls ``EXPERIMENT_REGISTRY.declare`` once,
after its rules: its final targets, the rules whose conditions may share a job (and the key that keeps
them apart), how the plan sizes each of its rules' jobs, and its sections of the findings. The shared
parts of the workflow loop over the declarations: ``rule all`` over the targets, the batch rules over
the batched rules (defined after every include: ``Registry.batch_rules``), the plan (``gna.plan``) over
the estimators and the findings (``gna.report.findings``) over the sections. No shared file lists the
experiments, and the order of the includes does not matter. docs/adding-an-experiment.md walks
through one.

The plan and the findings run in other processes than the Snakefile: they receive the declarations as
data (``Estimator``, ``Section``: a function's dotted name and its options), through the params of
their rules, or, for a plan made outside Snakemake, through ``dump`` (``gna.plan.dag_jobs``).

Torch-free and stdlib-only: the Snakefile imports it.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Callable

REGISTRY_OUT = "GNA_REGISTRY_OUT"
"""Where ``dump`` writes the declarations when a dry run is asked for them (gna.plan.dag_jobs)."""


@dataclass(frozen=True)
class Estimator:
    """How the plan sizes one job of a rule: ``function(study, wildcards, **options)`` -> an
    ``gna.plan.estimate.Estimate``; ``function`` is ``"module:name"`` (gna.plan.job_estimates holds
    the common ones). ``experiment``: the config key whose settings arrive as the option ``exp``."""

    function: str
    options: dict = field(default_factory=dict)
    experiment: str | None = None


@dataclass(frozen=True)
class Section:
    """One claim check of the findings: ``function(figures_dir, **options)`` -> rows of (claim,
    model, verdict, evidence), given also ``settings`` (the verdicts' settings) and ``rankings`` where its
    signature names them. ``order``: where it stands in findings.md (the paper's order)."""

    order: float
    function: str
    options: dict = field(default_factory=dict)


@dataclass
class Experiment:
    name: str
    """Its key under the config's ``experiments`` (or a name of its own, with ``always``)."""
    targets: Callable[[], list[str]] = lambda: []
    """The final outputs ``rule all`` asks for when the study runs it (figures and tables)."""
    batched: dict[str, Callable] = field(default_factory=dict)
    """Rules whose conditions may share a job (config batch_conditions): rule -> wildcards -> key;
    conditions with different keys never share one."""
    shared: dict[str, Callable] = field(default_factory=dict)
    """Batched rules whose conditions share work when they run together
    (:mod:`gna.experiments.shared_conditions`): rule -> wildcards -> key. Batched by that key even
    where batch_conditions is 1 (one job per model, not per condition)."""
    batch_inputs: Callable[[], list[str]] = lambda: []
    """Outputs of batched rules that consumers take by wildcard (a per-model list of conditions):
    the batches are built from them and from the consumers' fixed inputs."""
    launch: dict[str, tuple] = field(default_factory=dict)
    """rule -> (threads, resources) of its batch, where those are not a model job's."""
    on_demand: Callable[[], list[str]] = lambda: []
    """Outputs built only when asked for by name (``snakemake <target>``), outside ``rule all``: the plan
    sizes their jobs too, where the study runs the experiment."""
    plan: dict[str, Estimator] = field(default_factory=dict)
    findings: list[Section] = field(default_factory=list)
    always: bool = False
    """Part of every study (the scan, the open questions), not switched on by ``experiments``."""


class Registry:
    """The declarations of one workflow (one per Snakefile parse: common.smk makes it)."""

    def __init__(self):
        self.experiments: dict[str, Experiment] = {}
        self.shared_batches: dict[str, tuple[str, list[dict]]] = {}
        """batch rule -> (its rule, each condition's wildcards): the batches that exist only because
        their conditions share work (batch_conditions 1), which the plan counts condition by condition."""

    def declare(self, name: str, **what) -> Experiment:
        if name in self.experiments:
            raise ValueError(f"experiment {name!r} is declared twice (each rule file declares its own once)")
        exp = self.experiments[name] = Experiment(name, **what)
        for rule in exp.plan:
            owners = [e.name for e in self.experiments.values() if rule in e.plan and e is not exp]
            if owners:
                raise ValueError(f"rule {rule!r}: plan estimates from both {owners[0]!r} and {name!r}")
        return exp

    def _each(self) -> list[Experiment]:
        """The declarations by name: whatever order the rule files are included in, the same order."""
        return [self.experiments[name] for name in sorted(self.experiments)]

    def running(self, enabled) -> list[Experiment]:
        """The declared experiments the study runs: those ``enabled`` names, and the ``always`` ones."""
        return [e for e in self._each() if e.always or e.name in enabled]

    def targets(self, enabled) -> list[str]:
        return [t for e in self.running(enabled) for t in e.targets()]

    def on_demand(self, enabled) -> list[str]:
        return [t for e in self.running(enabled) for t in e.on_demand()]

    def on_demand_rules(self, enabled) -> list[str]:
        """The rules the plan sizes for on-demand experiments only (none of their jobs is in ``all``):
        a study's budget is what ``all`` costs, these apart."""
        return [r for e in self.running(enabled) if e.on_demand() and not e.targets() for r in e.plan]

    def batched(self) -> dict[str, Callable]:
        return {rule: key for e in self._each() for rule, key in e.batched.items()}

    def shared(self) -> dict[str, Callable]:
        return {rule: key for e in self._each() for rule, key in e.shared.items()}

    def batch_inputs(self) -> list[str]:
        return [f for e in self._each() for f in e.batch_inputs()]

    def launch(self) -> dict[str, tuple]:
        return {rule: how for e in self._each() for rule, how in e.launch.items()}

    def estimators(self) -> dict[str, dict]:
        """rule -> its Estimator as a dict (data, for the plan's process)."""
        return {rule: asdict(est) for e in self._each() for rule, est in e.plan.items()}

    def sections(self) -> list[dict]:
        """Every declared section (the findings say n/a where a run lacks its tables), in order."""
        found = [s for e in self._each() for s in e.findings]
        return [asdict(s) for s in sorted(found, key=lambda s: (s.order, s.function))]

    def dump(self, enabled=()) -> None:
        """Write the plan's and the findings' declarations where ``$GNA_REGISTRY_OUT`` says, if it says, with
        the on-demand targets of the experiments ``enabled`` names."""
        path = os.environ.get(REGISTRY_OUT)
        if path:
            with open(path, "w") as f:
                json.dump({"estimators": self.estimators(), "sections": self.sections(),
                           "on_demand": self.on_demand(enabled), "on_demand_rules": self.on_demand_rules(enabled),
                           "shared_batches": self.shared_batches}, f,
                          sort_keys=True)


def resolve(dotted: str) -> Callable:
    """The function ``"package.module:name"`` names."""
    module, _, name = dotted.partition(":")
    if not name:
        raise ValueError(f"{dotted!r} is not 'module:function'")
    return getattr(importlib.import_module(module), name)


def call_with(fn: Callable, *args, available: dict, **options):
    """``fn(*args, **options)``, plus the ``available`` keywords its signature names."""
    names = inspect.signature(fn).parameters
    return fn(*args, **{k: v for k, v in available.items() if k in names}, **options)
