"""One KV retrieval under several prompt formats, on the same keys, values and query per example.

Formats (``n`` pairs, the query's value among them)::

    paper    Memorize the following dictionary:\\nk3:42\\n...\\nThe value of the key 'k3' is   -> " 42" of n values
    compact  k3 42\\n...\\nk3 ?                                                             -> " 42" of n values
    letter   k3 42\\n...\\nk3 ?\\nA 17\\nB 42\\nC 5\\nD 88\\nAnswer:                             -> " B" of A-D (MMLU's letters)
    value    the letter prompt                                                              -> " 42" of the listed values

``paper`` and ``compact`` are :func:`gna.probes.kv.generate_kv_probe`'s, draw for draw (same seed,
same examples); ``letter`` and ``value`` list ``n_options`` of the dictionary's values (the query's
and others, from a second generator, so the first draws stay the same) as MMLU lists its options:
answered by the letter (MMLU's format) or by the value itself (the "classic" cloze format). The
option lines are the micro world's MMLU lines (``A 63``).

Per format a ranking (the scan, :func:`gna.scan.scan`); then the rank correlation between formats, the
heads in one format's top k and not in another's (format-sensitive), and one ranking across formats:
by a head's worst rank over the formats the model can do (baseline above chance), the strongest
across formats first.
"""
from __future__ import annotations

import itertools
import random

import numpy as np
import pandas as pd

from ..errors import ProbeError
from ..probes.kv import COMPACT_KEYS, PAPER_HEADER, english_words
from ..probes.values import DEFAULT_RULE, rule_tag, values_of

FORMATS = ("paper", "compact", "letter", "value")
LETTERS = "ABCDEFGHIJ"
OPTION_SEED = 7919  # the option draws' generator: seed * OPTION_SEED + 1, apart from the pairs' draws


def format_probes(n_pairs: int, n_examples: int, seed: int, formats=FORMATS, separator: str = " ",
                  key_pool=None, n_options: int = 4, values: str = DEFAULT_RULE) -> dict[str, list[dict]]:
    """``{format: examples}``: example i of every format has the same keys, values and query; the
    values drawn by the rule ``values`` (:mod:`gna.probes.values`), as the KV probe draws them."""
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ProbeError(f"probe formats {bad} are not among {FORMATS}")
    drawn = values_of(values)
    if not 1 <= n_pairs <= len(drawn):
        raise ProbeError(f"n_pairs={n_pairs} outside 1..{len(drawn)}: values are distinct numbers {values}")
    if not 2 <= n_options <= min(n_pairs, len(LETTERS)):
        raise ProbeError(f"n_options={n_options}: listed options need 2..min(n_pairs={n_pairs}, {len(LETTERS)})")
    pool = list(dict.fromkeys(key_pool if key_pool is not None else COMPACT_KEYS))
    if len(pool) < n_pairs:
        raise ProbeError(f"key pool has {len(pool)} distinct keys, fewer than n_pairs={n_pairs}")
    rng, opt_rng = random.Random(seed), random.Random(seed * OPTION_SEED + 1)
    tag, extra = rule_tag(values), ({} if values == DEFAULT_RULE else {"values": values})
    out = {f: [] for f in formats}
    for i in range(n_examples):
        keys = rng.sample(pool, n_pairs)
        vals = rng.sample(drawn, n_pairs)
        q = rng.randrange(n_pairs)
        others = opt_rng.sample([v for j, v in enumerate(vals) if j != q], n_options - 1)
        options = others[:]
        options.insert(opt_rng.randrange(n_options), vals[q])
        compact = "\n".join(f"{k} {v}" for k, v in zip(keys, vals)) + f"\n{keys[q]} ?"
        listed = compact + "\n" + "\n".join(f"{LETTERS[j]} {v}" for j, v in enumerate(options)) + "\nAnswer:"
        prompts = {
            "paper": (PAPER_HEADER + "\n".join(f"{k}:{v}" for k, v in zip(keys, vals))
                      + f"\nThe value of the key '{keys[q]}' is", [separator + str(v) for v in vals], q),
            "compact": (compact, [separator + str(v) for v in vals], q),
            "letter": (listed, [" " + LETTERS[j] for j in range(n_options)], options.index(vals[q])),
            # after "Answer:" a space, as before MMLU's letters, whatever the dictionary's separator
            "value": (listed, [" " + str(v) for v in options], options.index(vals[q])),
        }
        for f in formats:
            prompt, choices, answer = prompts[f]
            out[f].append({"id": f"kv-{f}-n{n_pairs}-s{seed}{tag}-{i}", "fmt": f, "n_pairs": n_pairs, "seed": seed,
                           "prompt": prompt, "choices": choices, "answer": answer, "query": keys[q], **extra})
    return out


def key_pool(name: str):
    """The keys every format draws from: ``compact`` (k0..k299, the micro world's) or ``words``
    (English words, the paper's)."""
    if name not in ("compact", "words"):
        raise ProbeError(f"probe_formats.keys = {name!r}: expected 'compact' or 'words'")
    return COMPACT_KEYS if name == "compact" else english_words()


def _key(df: pd.DataFrame) -> pd.Series:
    return df.layer.astype(str) + ":" + df.kind + ":" + df["head"].astype(str)


def rank_correlations(rankings: pd.DataFrame, top_k: int | None = None) -> pd.DataFrame:
    """Spearman's rho between every two formats' rankings of the same heads (ranks are a permutation,
    so rho is the Pearson correlation of the ranks), and with ``top_k`` the share of one format's top k
    in the other's (``topk_overlap``): heads that do nothing in either format rank by noise, which
    rho over every head counts and the top k does not. ``rankings``: the scan's rows plus ``format``."""
    wide = rankings.assign(_h=_key(rankings)).pivot(index="_h", columns="format", values="rank")
    rows = []
    for a, b in itertools.combinations(list(dict.fromkeys(rankings.format)), 2):
        rho = float(np.corrcoef(wide[a], wide[b])[0, 1]) if len(wide) > 1 else float("nan")
        row = dict(format_a=a, format_b=b, spearman=rho)
        if top_k:
            row["topk_overlap"] = len(set(wide.index[wide[a] <= top_k]) & set(wide.index[wide[b] <= top_k])) / top_k
        rows.append(row)
    return pd.DataFrame(rows, columns=["format_a", "format_b", "spearman"] + (["topk_overlap"] if top_k else []))


def usable_formats(rankings: pd.DataFrame, above_chance: float) -> list[str]:
    """The formats whose unablated accuracy is above chance (1 / choices) by ``above_chance``: a
    ranking on a format the model cannot do says nothing about its heads."""
    base = rankings.groupby("format", sort=False).agg(acc=("baseline_accuracy", "first"),
                                                      chance=("chance", "first"))
    return [f for f, r in base.iterrows() if r.acc >= r.chance + above_chance]


def across_formats(rankings: pd.DataFrame, formats: list[str], top_k: int) -> pd.DataFrame:
    """One row per head: its rank and drop in every format, ``worst_rank`` and ``mean_rank`` over
    ``formats``, ``format_sensitive`` (in one of their top ``top_k`` and not in another's), and
    ``rank``: by worst rank, then mean rank, then position (the strongest across formats first)."""
    if not formats:
        raise ProbeError("no prompt format has a baseline above chance: no ranking across formats")
    heads = rankings[rankings.format == formats[0]][["model", "layer", "head", "kind"]].reset_index(drop=True)
    out = heads.copy()
    for f in dict.fromkeys(rankings.format):
        sub = rankings[rankings.format == f].set_index(["layer", "head", "kind"])
        idx = list(zip(heads.layer, heads["head"], heads.kind))
        out[f"rank_{f}"] = sub.loc[idx, "rank"].to_numpy()
        out[f"drop_{f}"] = sub.loc[idx, "drop"].to_numpy()
    ranks = out[[f"rank_{f}" for f in formats]]
    out["worst_rank"], out["mean_rank"] = ranks.max(axis=1), ranks.mean(axis=1)
    in_top = ranks <= top_k
    out["format_sensitive"] = in_top.any(axis=1) & ~in_top.all(axis=1)
    out["formats_used"] = "+".join(formats)
    out = out.sort_values(["worst_rank", "mean_rank", "layer", "kind", "head"]).reset_index(drop=True)
    out["rank"] = range(1, len(out) + 1)
    return out


def format_rankings(probe_paths: list[str], *, spec: dict, formats: list[str], top_k: int, above_chance: float,
                    batch_size: int, max_rows: int, model_name: str, log) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rule probe_formats' scan job: the model's exact head ranking on each format's probe (``probe_paths``, in
    the order of ``formats``), each tagged with its format, chance and probe file; and the ranking across the
    formats scored above chance (:func:`across_formats`)."""
    from ..io import sha256_file
    from ..models import load_model
    from ..probes.kv import read_jsonl
    from ..probes.scoring import encode
    from ..scan import scan

    model, tok = load_model(spec)
    parts = []
    for fmt, path in zip(formats, probe_paths):
        encoded = encode(read_jsonl(path), tok, name=path)
        ranking, _ = scan(model, encoded, batch_size=batch_size, max_rows=max_rows, model_name=model_name,
                          progress=False)
        parts.append(ranking.assign(format=fmt, chance=1 / encoded.n_choices, probe=str(path),
                                    probe_sha256=sha256_file(path)))
        log.info("%s: baseline %.3f (chance %.3f); top heads\n%s", fmt, ranking.baseline_accuracy[0],
                 1 / encoded.n_choices, ranking.head(5).to_string())
    rankings = pd.concat(parts, ignore_index=True)
    used = usable_formats(rankings, above_chance)
    log.info("formats above chance: %s; rank correlations\n%s", used, rank_correlations(rankings).to_string())
    return rankings, across_formats(rankings, used, top_k)
