"""The micro models' acceptance table, measured through lm-eval on the shipped task files.

``micro_table_row(model_dir, data_dir)`` loads a model directory with the pipeline's loader
(:func:`gna.models.load_model`, as a Hugging Face model), evaluates every micro task of
``data_dir`` (the files :func:`gna.micro.tasks.write_tasks` wrote) and KV retrieval at other
dictionary sizes (``micro_kv4``, ``micro_kv16``: the ``micro_kv`` task over files of
:func:`write_kv_sweep`), and returns one flat row::

    model, params, kv4, kv8, kv16, knowledge (mean of the three formats), knowledge_cloze,
    knowledge_statement, knowledge_fill, mmlu, swde, lambada, lambada_ppl, chain, arc_regular,
    arc_chat

The sweep's rows are the ``test`` split of :func:`gna.micro.tasks.kv_rows`, which the training
corpus excludes (its first ``eval_rows`` rows, hence ``count`` 128 by default).
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Iterable

from ..io import write_text
from . import tasks as T

SWEEP_PAIRS = (4, 16)


def write_kv_sweep(out_dir: str | os.PathLike, config=None, pairs: Iterable[int] = SWEEP_PAIRS,
                   count: int = 128) -> dict[int, str]:
    """``micro_kv<n>.jsonl`` for each ``n`` of ``pairs`` (the ``micro_kv`` row schema)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for n in pairs:
        rows = T.kv_rows(config, n, count, split="test")
        text = "".join(json.dumps({**r, "task": f"micro_kv{n}"}, sort_keys=True) + "\n" for r in rows)
        paths[n] = str(write_text(text, out / f"micro_kv{n}.jsonl"))
    return paths


def kv_sweep_tasks(data_dir: str | os.PathLike, sweep_dir: str | os.PathLike,
                   pairs: Iterable[int] = SWEEP_PAIRS) -> dict[str, dict[str, Any]]:
    """lm-eval task dicts ``micro_kv<n>``: the ``micro_kv`` config over the sweep's files."""
    from .lm_eval_tasks import task_configs
    base = task_configs(data_dir, ["micro_kv"])[0]
    out = {}
    for n in pairs:
        cfg = copy.deepcopy(base)
        cfg["task"] = f"micro_kv{n}"
        cfg["dataset_kwargs"]["data_files"]["test"] = str((Path(sweep_dir) / f"micro_kv{n}.jsonl").resolve())
        out[cfg["task"]] = cfg
    return out


def micro_table_row(model_dir: str | os.PathLike, data_dir: str | os.PathLike, sweep_dir: str | os.PathLike,
                    batch_size: int = 32) -> dict[str, Any]:
    """One row of the acceptance table for the model in ``model_dir`` (see the module doc)."""
    import torch

    from ..evaluation.lm_eval_bridge import TaskSuite, evaluate
    from ..models import load_model

    model, tok = load_model({"path": str(model_dir)})
    extra = kv_sweep_tasks(data_dir, sweep_dir)
    suite = TaskSuite(micro_data=str(data_dir), extra=extra)
    names = [*extra, *T.TASKS]
    with torch.no_grad():
        raw = evaluate(model, tok, names, suite, batch_size=batch_size, max_length=512)
    # each micro metric is reported under one filter: key the table by metric name alone
    res = {t: {m: v for (m, _f), v in ms.items()} for t, ms in raw.items()}
    k = {t: res[t]["acc"] for t in T.KNOWLEDGE_TASKS}
    row = {"model": Path(model_dir).name, "params": sum(p.numel() for p in model.parameters())}
    row.update({f"kv{n}": res[f"micro_kv{n}"]["acc"] for n in SWEEP_PAIRS})
    row["kv8"] = res["micro_kv"]["acc"]
    row["knowledge"] = sum(k.values()) / len(k)
    row.update({t.replace("micro_", ""): v for t, v in k.items()})
    row.update(mmlu=res["micro_mmlu"]["acc"], swde=res["micro_swde"]["contains"],
               swde_exact=res["micro_swde"]["exact_match"], lambada=res["micro_lambada"]["acc"],
               lambada_ppl=res["micro_lambada"]["perplexity"], chain=res["micro_chain"]["answer_match"],
               chain_exact=res["micro_chain"]["exact_match"], arc_regular=res["micro_arc_regular"]["acc"],
               arc_chat=res["micro_arc_chat"]["exact_match"])
    order = ["model", "params", "kv4", "kv8", "kv16", "knowledge", *[t.replace("micro_", "") for t in T.KNOWLEDGE_TASKS],
             "mmlu", "swde", "swde_exact", "lambada", "lambada_ppl", "chain", "chain_exact", "arc_regular", "arc_chat"]
    return {c: row[c] for c in order}
