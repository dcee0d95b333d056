"""One claim's picked conditions scored on the fresh items: each role's tasks at its n (each task's first
``n / tasks``, :func:`gna.confirmation.judge.per_task`), the conditions that score the same tasks at the
same n evaluated together (their shared layers run once: :func:`gna.experiments.run.condition_rows`),
every answer kept with its condition's id."""
from __future__ import annotations

from ..experiments.run import condition_rows
from ..probes.kv import parse_probe_task
from .judge import per_task


def groups(conditions: list[dict], tasks: dict, kv_tasks: list[str]) -> dict[tuple, list[dict]]:
    """(task names, items a task) -> the conditions scoring them so; a KV role ``kv<pairs>`` reads the
    fresh probe tasks of that pair count."""
    out: dict[tuple, list[dict]] = {}
    for c in conditions:
        for role, n in c["items"].items():
            names = ([t for t in kv_tasks if parse_probe_task(t)[0] == int(role[2:])] if role.startswith("kv")
                     else list(tasks[role]))
            out.setdefault((tuple(names), per_task(n, names)), []).append(c)
    return out


def score_claim(model, spec: dict, picked: dict, tasks: dict, kv_probes: dict, eval_cfg: dict, fields: dict,
                log=lambda *a: None) -> list:
    """The answers (a list of tables, :func:`gna.experiments.run.write_answers`' input) of ``picked``'s
    conditions (one claim of a pick), ``model`` a loaded ``(model, tokenizer)``."""
    answers: list = []
    for (names, limit), conds in groups(picked["conditions"], tasks, list(kv_probes)).items():
        log("%s, %d items a task: %s", ", ".join(names), limit, ", ".join(c["id"] for c in conds))
        settings = {**eval_cfg, "limit": limit, "kv_probes": {t: f for t, f in kv_probes.items() if t in names}}
        condition_rows(spec, list(names), [c["interventions"] for c in conds], settings, None,
                       [{**fields, "condition": c["id"]} for c in conds], model=model, answers=answers)
    return answers
