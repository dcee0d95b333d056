"""``gna``: the library's analyses on one model, without a study config or Snakemake.

    gna describe MODEL              the token mixers: layer, kind, heads, head width, K/V grouping
    gna scan MODEL --out DIR        KV probe -> head ranking -> G&A roles -> heatmaps, into DIR

A thin layer: every step calls the library function the pipeline's rule calls (``head_scan.py``,
``kv_probe.py``, ``ga_heatmaps.py``) with the same arguments, so ``gna scan``'s ranking equals the
pipeline's for the same probe (tests/test_cli.py checks it value for value).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16", "auto")


def _spec(args) -> dict:
    """The ModelSpec fields the options name (the pipeline's ``model_spec`` in common.smk)."""
    spec = {"path": args.model, "dtype": args.dtype, "device": args.device}
    if args.family:
        spec["family"] = args.family
    if args.channel_group:
        spec["adapter_options"] = {"channel_group": args.channel_group}
    return spec


def _model_name(model: str) -> str:
    """The ``model`` column of the tables: a directory's name, or an id's last part."""
    return Path(model.rstrip("/")).name or model


def _text_table(rows: list[dict]) -> str:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def describe_table(model) -> str:
    """The mixers of ``model`` as a text table, one row per mixer (Zamba2: per invocation)."""
    from .models import adapter_for

    adapter = adapter_for(model)
    desc = adapter.describe()
    cfg = model.config
    arch = (getattr(cfg, "architectures", None) or [type(model).__name__])[0]
    head = (f"{arch} (model_type {getattr(cfg, 'model_type', '?')}), adapter {adapter.family}: "
            f"{desc.n_layers} layers, {len(desc.mixers)} mixers, {desc.n_heads_total} heads")
    rows = [{"layer": m.layer, "kind": m.kind, "n_heads": m.n_heads, "head_dim": m.head_dim,
             "kv_heads": "-" if m.kv_heads is None else m.kv_heads,
             "heads_per_kv": "-" if m.kv_group is None else m.kv_group,
             "heads_live_in (input of)": m.out_proj_path or "?"} for m in desc.mixers]
    return head + "\n" + _text_table(rows)


def cmd_describe(args) -> int:
    from .models import load_model

    model, _ = load_model(_spec(args), with_tokenizer=False)
    print(describe_table(model))
    return 0


def heatmap_rows(role: str, head, matrix, tokens: list[str]) -> list[dict]:
    """Tidy rows of one head's mixing ``matrix (T, T)`` on the prompt: the causal part
    (key_pos <= query_pos; the rest is zero by construction)."""
    layer, h, kind = head
    T = matrix.shape[0]
    return [dict(role=role, layer=layer, head=h, kind=kind, query_pos=t, query_token=tokens[t], key_pos=s,
                 key_token=tokens[s], weight=float(matrix[t, s])) for t in range(T) for s in range(t + 1)]


SCAN_FILES = ("probe.examples.jsonl", "ranking.csv", "ga.csv", "heatmap_gather.csv", "heatmap_aggregate.csv",
              "heatmaps.png")
"""What ``gna scan`` writes into ``--out``."""


def check_scan_args(args) -> None:
    """Every argument and ``--out`` checked before the model loads (a bad one is a one-line error,
    not a traceback after minutes of scanning)."""
    from .errors import ConfigError

    for name, value, low, high in (("--pairs", args.pairs, 1, 100), ("--n-examples", args.n_examples, 1, None),
                                   ("--batch-size", args.batch_size, 1, None), ("--max-rows", args.max_rows, 1, None),
                                   ("--classify-top", args.classify_top, 0, None),
                                   ("--classify-examples", args.classify_examples, 1, None),
                                   ("--threshold", args.threshold, 0, 1),
                                   ("--max-unknown-share", args.max_unknown_share, 0, 1),
                                   ("--min-over-chance", args.min_over_chance, 0, 1)):
        if value < low or (high is not None and value > high):
            raise ConfigError(f"{name} {value} is outside {low}..{'' if high is None else high}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {args.out} exists and is not a directory")
    if out.is_dir() and any(p.name not in SCAN_FILES for p in out.iterdir()):
        raise ConfigError(f"--out {args.out} holds files that gna scan does not write (it replaces the whole "
                          f"directory): give a new or empty directory, or a former gna scan output")
    # DIR is written as a temporary directory beside it, then renamed: its parent must take it.
    parent = next(p for p in out.resolve().parents if p.exists())
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {args.out}: cannot write in {parent}")


def cmd_scan(args) -> int:
    import pandas as pd
    import torch

    from .ga_patterns import classify_heads
    from .io import atomic_path, write_csv
    from .pipeline import provenance
    from .models import load_model
    from .probes.guard import check_probe
    from .probes.kv import generate_kv_probe, write_jsonl
    from .probes.scoring import encode
    from .report import heatmaps
    from .report.common import save_figure
    from .attribution_scan import guard_summary
    from .scan import scan, top_k

    check_scan_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out, name = Path(args.out), args.name or _model_name(args.model)
    # Everything is computed before anything is written, and written into a temporary directory
    # renamed to DIR at the end: a failing run leaves DIR as it was.
    model, tok = load_model(_spec(args))
    examples = generate_kv_probe(args.pairs, args.n_examples, args.seed, separator=args.separator, fmt=args.format)
    encoded = encode(examples, tok)
    checked = check_probe(model, tok, encoded, batch_size=args.batch_size, max_unknown_share=args.max_unknown_share,
                          min_over_chance=args.min_over_chance, force=args.force,
                          what=f"the KV probe ({args.format} format, {args.pairs} pairs, separator {args.separator!r})")
    # As workflow/scripts/head_scan.py does, step for step.
    ranking, guard = scan(model, encoded, method=args.method, batch_size=args.batch_size, baseline=checked.baseline,
                          max_rows=args.max_rows, model_name=name, candidates=args.candidates,
                          guard_sample=args.guard_sample, guard_k=args.guard_k, atp_score=args.atp_score,
                          guard_level=args.guard_level,
                          graddrop=args.graddrop, seed=args.seed)
    ranking = ranking.assign(**checked.columns())
    top = top_k(ranking, min(args.classify_top, len(ranking)))
    ga = classify_heads(model, tok, examples[:args.classify_examples], top, threshold=args.threshold)
    ranking = ranking.assign(**provenance())  # after the scan: which fused kernels it ran
    ga = ranking.merge(ga, on=["layer", "head", "kind"]).sort_values("rank")
    # As workflow/scripts/ga_heatmaps.py does: the top Gather / Aggregate head on the first prompt.
    prompt = examples[0]["prompt"]
    patterns = heatmaps.head_patterns(model, tok, prompt, ga)
    tokens = tok.convert_ids_to_tokens(tok(prompt)["input_ids"])

    with atomic_path(out, directory=True) as tmp:
        written = [write_jsonl(examples, tmp / "probe.examples.jsonl"), write_csv(ranking, tmp / "ranking.csv"),
                   write_csv(ga, tmp / "ga.csv")]
        for role, (head, mat) in patterns.items():
            if mat is not None:
                rows = heatmap_rows(role, head, mat, tokens)
                written.append(write_csv(pd.DataFrame(rows), tmp / f"heatmap_{role}.csv"))
        save_figure(heatmaps.figure({name: patterns}, {name: tokens}), tmp / "heatmaps.png")
        written.append(tmp / "heatmaps.png")

    print(f"{name}: KV probe of {len(examples)} prompts x {args.pairs} pairs ({args.format}); "
          f"baseline accuracy {ranking.baseline_accuracy.iloc[0]:.3f} (chance {checked.chance_accuracy:.3f})")
    if checked.forced:
        print(f"forced (--force): {'; '.join(checked.problems())}; ranking.csv records probe_check = forced")
    print(guard_summary(guard))
    shown = ga if len(ga) else ranking.head(args.classify_top or 10)
    cols = [c for c in ("rank", "layer", "head", "kind", "accuracy", "drop", "role") if c in shown]
    print(shown[cols].head(10).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for role, (head, _) in patterns.items():
        print(f"top {role} head: " + (f"L{head[0]}H{head[1]} ({head[2]})" if head else
                                      f"none among the top {len(top)} heads"))
    print("wrote " + ", ".join(str(out / p.name) for p in written))
    return 0


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="a Hugging Face id (from the local cache when offline) or a "
                   "local directory holding config.json and the weights")
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="weights' dtype (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto (default: %(default)s); "
                   "refused at once if this machine lacks it")
    p.add_argument("--family", help="force an adapter family (default: detected from config.json)")
    p.add_argument("--channel-group", type=int, metavar="N",
                   help="Mamba-1: channels per head (must divide the inner width; default 1, the paper's)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="gna", description="The Gather-and-Aggregate analyses on one model, without "
                                  "a study config or Snakemake. Errors name the problem and exit with status 2.",
                                  epilog="gna COMMAND --help shows a command's options.")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("describe", help="print the model's token mixers",
                       description="Load MODEL and print its token mixers: layer, kind (attention, mamba1, mamba2, "
                       "discrete-mamba2), heads, head width, K/V heads and how many query heads share one, and the "
                       "module whose input holds the heads, viewed as (..., n_heads, head_dim).")
    _model_options(d)
    d.set_defaults(run=cmd_describe)
    s = sub.add_parser("scan", help="rank heads by KV retrieval, classify G&A roles, draw heatmaps",
                       description="Generate a KV-retrieval probe, ablate every head alone and rank the heads by the "
                       "accuracy drop (gna.scan.scan, as the pipeline's head_scan rule; --method atp+exact ablates "
                       "only the heads attribution patching ranks on top), classify the top "
                       "heads as Gather or Aggregate from their mixing patterns, and draw the top Gather and "
                       "Aggregate heads' patterns on the first prompt. Writes into DIR: probe.examples.jsonl, "
                       "ranking.csv, ga.csv, heatmap_gather.csv, heatmap_aggregate.csv (tidy rows) and "
                       "heatmaps.png. DIR is written at the end, all at once (a temporary directory renamed): nothing is "
                       "written if a step fails. Stops before ranking if the probe means nothing for the model "
                       "(too many unknown tokens, baseline at chance) unless --force.")
    _model_options(s)
    s.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    s.add_argument("--name", help="model name in the tables (default: MODEL's last path part)")
    g = s.add_argument_group("KV probe (gna.probes.kv)")
    g.add_argument("--n-examples", type=int, default=200, help="prompts (default: %(default)s)")
    g.add_argument("--pairs", type=int, default=20, help="key-value pairs per prompt (1..100) (default: %(default)s)")
    g.add_argument("--format", choices=("paper", "compact"), default="paper",
                   help="paper: 'Memorize the following dictionary:' with English keys; compact: 'k3 42' lines "
                   "(the micro models' format; default: %(default)s)")
    g.add_argument("--separator", default=" ", help="text between the prompt and the value; the G&A paper's code "
                   "uses '' (pass --separator ''); default: %(default)r")
    g.add_argument("--seed", type=int, default=0, help="probe seed (default: %(default)s)")
    g = s.add_argument_group("scan and G&A roles (the pipeline's scan.* settings)")
    g.add_argument("--batch-size", type=int, default=32, help="prompts per forward (default: %(default)s)")
    g.add_argument("--max-rows", type=int, default=256, help="rows per ablation forward (prompts x heads) (default: %(default)s)")
    g.add_argument("--classify-top", type=int, default=10, help="top heads whose G&A role is classified (default: %(default)s)")
    g.add_argument("--classify-examples", type=int, default=20, help="prompts the roles are read on (default: %(default)s)")
    g.add_argument("--threshold", type=float, default=0.3, help="a role needs a score at least this (default: %(default)s)")
    g.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    g = s.add_argument_group("probe check: before ranking, does the probe mean anything for the model?")
    g.add_argument("--max-unknown-share", type=float, default=0.05, help="stop if more than this share of the "
                   "prompts' tokens are the tokenizer's unknown token (default: %(default)s)")
    g.add_argument("--min-over-chance", type=float, default=0.05, help="stop unless the model's baseline accuracy "
                   "beats chance (1 / pairs) by this (default: %(default)s)")
    g.add_argument("--force", action="store_true", help="rank anyway; ranking.csv records probe_check = forced")
    g = s.add_argument_group("scan method (the pipeline's scan.method and its settings)")
    g.add_argument("--method", choices=("exact", "atp", "atp+exact"), default="exact",
                   help="exact: ablate every head (the paper's ranking, one partial forward per head); atp: rank by "
                   "the attribution-patching estimate only (one forward + backward per batch; no accuracy "
                   "columns); atp+exact: ablate the estimate's top --candidates heads and --guard-sample others "
                   "exactly, the rest ranked below by the estimate. benchmarks/atp_recall.py measures its recall of the "
                   "exact top heads against the heads ablated (docs/fast-scan.md); the default stays the paper's "
                   "exact (default: %(default)s)")
    g.add_argument("--candidates", type=int, default=16, help="atp+exact: heads ablated exactly (default: %(default)s)")
    g.add_argument("--guard-sample", type=int, default=8, help="atp+exact: other heads ablated exactly, drawn at "
                   "random (seed --seed), to count false negatives (default: %(default)s)")
    g.add_argument("--guard-k", type=int, default=10, help="atp+exact: the guard counts sampled heads beating the "
                   "k-th candidate (default: %(default)s)")
    g.add_argument("--guard-level", type=float, default=0.25, help="atp+exact: draw more heads after "
                   "--guard-sample until the 95%% bound on the share of non-candidates beating the k-th candidate "
                   "is at most this (11 draws when none does; default: %(default)s)")
    g.add_argument("--atp-score", choices=("margin", "logprob"), default="margin",
                   help="the estimate's score: correct choice's log-prob minus the best other's, or the correct "
                   "choice's log-prob (default: %(default)s)")
    g.add_argument("--graddrop", action="store_true", help="AtP*'s GradDrop (one backward pass per layer)")
    s.set_defaults(run=cmd_scan)
    return top


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gna`` console script; returns the exit status."""
    from .errors import GnaError, user_os_error

    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except GnaError as e:  # a problem with the input, named in the message: no traceback
        print(f"gna {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if not user_os_error(e):
            raise
        print(f"gna {args.command}: error: cannot write {e.filename or getattr(args, 'out', '')}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
