"""The screen as the pick reads it (:mod:`gna.confirmation.claims`' ``screen``), from the screen's files:
the per-item answers of its depths, removals, keepings, KV conditions and top-k removals, and the tables
that name their heads. Nothing of the confirmation's is read."""
from __future__ import annotations

import json
import re

import pandas as pd

from ..report.common import near_chance
from .parts import accuracy


def numbered(paths, pattern):
    return {int(re.search(pattern, str(f))[1]): pd.read_csv(f) for f in paths}


def screen_of(i, p) -> dict:
    """The screen from the pick's inputs ``i`` (named lists of files: gradual, minimal, individual,
    keeping, keeping_tables, kv, kv_tables, topk, topk_tables; each where the claims need it) and its
    params ``p`` (tasks, chance, n_layers, topk_share)."""
    screen = {"tasks": {k: list(v) for k, v in p["tasks"].items()}, "chance": dict(p["chance"]), "n_layers": p["n_layers"]}
    if "gradual" in i:
        screen["depth"] = numbered(i["gradual"], r"depth(\d+)\.answers")
        screen["minimal_depth"] = json.load(open(i["minimal"]))["minimal_depth"]
    if "individual" in i:
        screen["layer"] = numbered(i["individual"], r"layer(\d+)\.answers")
    if "keeping" in i:
        tables = [pd.read_csv(f) for f in i["keeping_tables"]]
        if all(t.get("kept", pd.Series(["nothing"])).iloc[0] != "nothing" for t in tables):
            screen["keep"] = {re.search(r"/(\w+)\.answers", f)[1]: pd.read_csv(f) for f in i["keeping"]}
            first = tables[0].iloc[0]
            screen["keep_heads"] = {role: [[int(x) for x in re.findall(r"\d+", h)] for h in str(first[role]).split()]
                                    for role in ("gather", "aggregate")}
    if "kv" in i:
        head = str(pd.read_csv(i["kv_tables"][0])["head"].iloc[0])
        if head != "none":
            full, ablated = (pd.read_csv(f) for f in i["kv"])
            screen["kv"] = {}
            for n in sorted({int(re.match(r"kv_n(\d+)_", t)[1]) for t in full.task}):
                keep = full.task.str.match(rf"kv_n{n}_")
                screen["kv"][(n, "none")] = full[keep]
                screen["kv"][(n, "aggregate")] = ablated[ablated.task.str.match(rf"kv_n{n}_")]
            screen["kv_head"] = [int(x) for x in re.findall(r"\d+", head.split()[0])]
    if "topk" in i:
        screen["topk"], screen["topk_heads"] = {}, {}
        for answers, table in zip(i["topk"], i["topk_tables"]):
            k, draw = re.search(r"/k(\d+)((?:-random\d+)?)\.answers", answers).groups()
            screen["topk"][(int(k), draw)] = pd.read_csv(answers)
            heads = str(pd.read_csv(table)["heads"].iloc[0])
            screen["topk_heads"][(int(k), draw)] = ([] if heads == "none" else
                                                    [[*map(int, re.findall(r"\d+", h))] for h in heads.split()])
        screen["topk_share"] = p["topk_share"]
        # a retrieval task the unmodified model is near chance on is left out, as the findings leave it
        base = screen["topk"][(0, "")]
        screen["tasks"]["retrieval"] = [t for t in screen["tasks"]["retrieval"]
                                        if not near_chance(accuracy(base, [t]), screen["chance"].get(t, 0.0))]
    return screen
