"""The bridge to lm-eval: evaluate an in-memory model, interventions applied, into tidy rows.

Interventions come as plain data (from the config or a rule), applied as context managers
around ``lm_eval.simple_evaluate(HFLM(pretrained=<model object>))``::

    [{"truncate": 18}, {"ablate_heads": [[16, 22], [17, 24]]}]

Kinds: ``truncate: n_layers``, ``drop_layer: i``, ``ablate_heads: [[layer, head(, kind)], ...]``,
``keep_heads: {layer, heads, kind?}`` (several layers: a list of them).
"""
from __future__ import annotations

import logging
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
from torch import nn

from .errors import ConfigError
from .interventions import ablate_heads, drop_layer, keep_heads, truncate

log = logging.getLogger(__name__)
INTERVENTIONS = ("truncate", "drop_layer", "ablate_heads", "keep_heads")


def _one(spec: dict) -> tuple[str, Any]:
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in INTERVENTIONS:
        raise ConfigError(f"an intervention is a one-key mapping with a key in {INTERVENTIONS}; got {spec!r}")
    return next(iter(spec.items()))


@contextmanager
def applied(model: nn.Module, specs: list[dict]) -> Iterator[nn.Module]:
    """Apply every intervention of ``specs`` (validated before any is entered)."""
    parsed = [_one(s) for s in specs or []]
    with ExitStack() as stack:
        for kind, arg in parsed:
            if kind == "truncate":
                stack.enter_context(truncate(model, arg))
            elif kind == "drop_layer":
                stack.enter_context(drop_layer(model, arg))
            elif kind == "ablate_heads":
                if arg:
                    stack.enter_context(ablate_heads(model, [tuple(h) for h in arg]))
            else:
                for keep in arg if isinstance(arg, list) else [arg]:
                    stack.enter_context(keep_heads(model, keep["layer"], keep.get("heads") or [], keep.get("kind")))
        yield model


def label(specs: list[dict]) -> str:
    """A short readable name of an intervention list, e.g. ``truncate=18+ablate=L16H22``."""
    parts = []
    for kind, arg in (_one(s) for s in specs or []):
        if kind == "ablate_heads":
            parts.append("ablate=" + (",".join(f"L{h[0]}H{h[1]}" for h in arg) if arg else "none"))
        elif kind == "keep_heads":
            keeps = arg if isinstance(arg, list) else [arg]
            parts.append("keep=" + ",".join(f"L{k['layer']}:{'/'.join(map(str, k.get('heads') or [])) or 'none'}"
                                            for k in keeps))
        else:
            parts.append(f"{kind}={arg}")
    return "+".join(parts) or "none"


class TaskSuite:
    """Resolves task names to what lm-eval takes: the micro tasks as dicts over local JSONL
    (``micro_data`` set), lm-eval's registered tasks (paper scale), or ``extra`` task dicts
    (e.g. a KV probe's, from :func:`gna.probes.kv.lm_eval_task_config`)."""

    def __init__(self, micro_data: str | None = None, extra: dict[str, dict] | None = None):
        self.micro_data, self.extra = micro_data, dict(extra or {})
        if micro_data is not None and not (Path(micro_data) / "micro_mmlu.jsonl").is_file():
            raise ConfigError(f"micro task data {micro_data!r} is missing (expected micro_mmlu.jsonl there)")

    def resolve(self, names: list[str]):
        from lm_eval.tasks import TaskManager

        local = [self.extra[n] for n in names if n in self.extra]
        rest = [n for n in names if n not in self.extra]
        if self.micro_data is not None and rest:
            from .micro.lm_eval_tasks import task_configs
            local, rest = local + task_configs(self.micro_data, rest), []
        # Indexing lm-eval's ~14,700 built-in tasks costs ~10 s: only when they are needed.
        return local + rest, TaskManager(include_defaults=bool(rest))


def evaluate(model: nn.Module, tokenizer, tasks: list[str], suite: TaskSuite, interventions=(),
             batch_size: int = 32, max_length: int = 2048, limit: int | None = None,
             chat_tasks: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` of ``model`` under ``interventions`` (stderr dropped).

    Tasks in ``chat_tasks`` run with the tokenizer's chat template (ARC-C "chat")."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length)
    groups = [[t for t in tasks if t not in chat_tasks], [t for t in tasks if t in chat_tasks]]
    out: dict[str, dict[str, float]] = {}
    with applied(model, list(interventions)):
        for chat, names in zip((False, True), groups):
            if not names:
                continue
            resolved, manager = suite.resolve(names)
            res = simple_evaluate(model=lm, tasks=resolved, task_manager=manager, limit=limit, bootstrap_iters=0,
                                  log_samples=False, apply_chat_template=chat, verbosity="WARNING")
            for task, metrics in res["results"].items():
                out[task] = {k.split(",")[0]: float(v) for k, v in metrics.items()
                             if "stderr" not in k and k not in ("alias", "sample_len") and isinstance(v, (int, float))}
    return out


def tidy(results: dict[str, dict[str, float]], **fields) -> pd.DataFrame:
    """Long table: one row per (task, metric), plus the given constant ``fields`` columns."""
    rows = [dict(fields, task=t, metric=m, value=v) for t, ms in results.items() for m, v in ms.items()]
    return pd.DataFrame(rows)
