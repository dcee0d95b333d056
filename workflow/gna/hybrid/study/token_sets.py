"""Which folders of prepared distillation tokens a study's jobs read (rule ``distill_tokens`` writes
them, :mod:`gna.hybrid.study.token_shards` reads them): the workflow asks this when it is parsed,
so it imports neither torch nor the shards' reader."""
from __future__ import annotations

from .settings import distillation_settings, swap_settings
from .data import stage_data, stage_steps
from .web_stream import token_set_name, web_mix

ROOT = "results/distill_data"


def _web(data: dict | None) -> bool:
    return (data or {}).get("source", "micro") == "web"


def token_sets(config: dict) -> dict[str, dict]:
    """Every folder of prepared web tokens the study's jobs read, ``path -> {"teacher", "data",
    "split", "seed", "rows", "readers"}`` (``readers``: ``align``, ``stage1``-``stage3``,
    ``heldout``). Jobs reading the same mix share a folder, holding the rows of the longest of
    them: stages 2 and 3 of the paper preset read one 2e10-token folder. Empty for micro data.
    ``config``: validated, the schema's defaults filled in (gna.config.schema.with_defaults)."""
    sets: dict[str, dict] = {}

    def add(reader, teacher, data, split, seed, rows):
        if not _web(data):
            return
        path = f"{ROOT}/{teacher}/{token_set_name(data, split, seed)}"
        entry = sets.setdefault(path, {"teacher": teacher, "data": web_mix(data), "split": split, "seed": int(seed),
                                       "rows": 0, "readers": []})
        entry["rows"] = max(entry["rows"], int(rows))
        entry["readers"].append(reader)

    d = distillation_settings(config)
    if d:
        seed = d.get("seed", config["seed"])
        for stage in (1, 2, 3):
            data = stage_data(d["data"], stage)
            batch = int(data.get("batch_size", 16))
            steps = stage_steps((d.get("steps") or [None] * 3)[stage - 1], (d.get("tokens") or [None] * 3)[stage - 1],
                                batch, int(data.get("seq_len", 2048)))
            add(f"stage{stage}", d["teacher"], data, "train", seed, steps * batch)
        data = d["data"]
        add("heldout", d["teacher"], data, "heldout", seed,
            int(d["heldout_batches"]) * int(data.get("batch_size", 16)))
    sw = swap_settings(config)
    if sw and not sw.get("student"):  # both alignment stages read the stream from its start
        data, batch = sw.get("data") or {}, int((sw.get("data") or {}).get("batch_size", 16))
        steps = [stage_steps((sw.get("steps") or [None, None])[i], (sw.get("tokens") or [None, None])[i], batch,
                             int(data.get("seq_len", 2048))) if _web(data) else 0 for i in (0, 1)]
        add("align", sw["teacher"], data, "train", config["seed"], max(steps) * batch)
    return sets


def tokens_of(sets: dict[str, dict], reader: str) -> list[str]:
    """The folder ``reader`` reads (``[path]``), or ``[]`` when it reads the micro corpus."""
    return [path for path, entry in sets.items() if reader in entry["readers"]]
