"""Old module names of the library, kept importable for one release after the modules moved into
packages that say what they hold.

``import gna.pipeline`` (or ``from gna.mixing import mixing_matrices``) still works: it warns with
a :class:`DeprecationWarning` naming the new module and returns that module itself, so its
functions, classes and monkeypatching are the new module's. No file stays at the old path, so the
move is a plain rename in git's history.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# old name -> new name; the old names go in the next release
MOVED = {
    "gna.attribution": "gna.scan.attribution",
    "gna.attribution_scan": "gna.scan.attribution_ranking",
    "gna.pipeline": "gna.jobs.script_job",
    "gna.condition_batches": "gna.jobs.condition_batches",
    "gna.devices": "gna.jobs.devices",
    "gna.config_schema": "gna.config.schema",
    "gna.config_checks": "gna.config.checks",
    "gna.task_names": "gna.config.task_names",
    "gna.architectures": "gna.config.architectures",
    "gna.study_config": "gna.config.study",
    "gna.evaluate": "gna.evaluation.lm_eval_bridge",
    "gna.lm_eval_047": "gna.evaluation.lm_eval_047",
    "gna.ga_patterns": "gna.patterns.ga_roles",
    "gna.ga_masks": "gna.patterns.ga_masks",
    "gna.mixing": "gna.patterns.mixing",
    "gna.memory": "gna.hybrid.cache_memory",
    "gna.questions.plan_rows": "gna.plan.question_rows",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name (asked only once the real paths found nothing) and loads the new module
    in its place: the import system reads the module back from ``sys.modules`` after
    :meth:`exec_module`, so the caller gets the new module object."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        old, new = module.__name__, MOVED[module.__name__]
        # stacklevel 2: the importing line (warnings skips the import machinery's own frames)
        warnings.warn(f"{old} moved to {new}; the old name goes in the next release", DeprecationWarning,
                      stacklevel=2)
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
