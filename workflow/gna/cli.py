"""``gna``: the library's analyses on one model, without a study config or Snakemake.

    gna describe MODEL              the token mixers: layer, kind, heads, head width, K/V grouping
    gna scan MODEL --out DIR        KV probe -> head ranking -> G&A roles -> heatmaps, into DIR
    gna export RANKING --k K ...    a ranking's top k as goombalab/mohawk's architecture YAML and --heads
    gna convert-gguf GGUF --out DIR  a GGUF checkpoint dequantized into a model directory

A thin layer: ``gna scan`` runs the routine the pipeline's ``head_scan`` rule runs
(:func:`gna.experiments.head_scan.head_scan`), its options being the study config's settings as the
schema states them (type, default, bounds, help), so its ranking equals the pipeline's for the same
probe (tests/test_cli.py checks it value for value); the probe and the heatmaps are the library
functions ``kv_probe.py`` and ``ga_heatmaps.py`` call.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from .config.options import COMMAND_DEFAULTS, SCAN_SETTINGS, dest, setting_option  # noqa: F401  (gna.cli's too)
from .models.mixer_table import describe_table  # noqa: F401  (also gna.cli.describe_table, as the tour uses it)

DTYPES = ("float32", "bfloat16", "float16", "auto")


def default_dtype(device: str) -> str:
    """``--dtype`` not given: bfloat16 on CUDA (as the paper ran its models; log-probs stay float32,
    gna.probes.scoring), float32 elsewhere (a CPU without bf16 units runs bf16 slower)."""
    return "bfloat16" if str(device).startswith("cuda") else "float32"


def _spec(args) -> dict:
    """The ModelSpec fields the options name (the pipeline's ``model_spec`` in common.smk)."""
    spec = {"path": args.model, "dtype": args.dtype or default_dtype(args.device), "device": args.device}
    if args.family:
        spec["family"] = args.family
    if args.channel_group:
        spec["adapter_options"] = {"channel_group": args.channel_group}
    return spec


def _model_name(model: str) -> str:
    """The ``model`` column of the tables: a directory's name, or an id's last part."""
    return Path(model.rstrip("/")).name or model


def cmd_describe(args) -> int:
    from .models import load_model

    from .jobs.devices import check_device

    args.device = check_device(args.device, key="--device")
    model, _ = load_model(_spec(args), with_tokenizer=False)
    print(describe_table(model))
    return 0


def cmd_convert_gguf(args) -> int:
    from .models.gguf import convert_gguf
    return convert_gguf(args.gguf, args.out, args.dtype, log=lambda msg: print(msg, file=sys.stderr)) and 0


SCAN_FILES = ("probe.examples.jsonl", "ranking.csv", "ga.csv", "heatmap_gather.csv", "heatmap_aggregate.csv",
              "heatmaps.png", "explorer.html", "patterns.json")
"""What ``gna scan`` writes into ``--out`` (the last two with ``--html``)."""


def check_scan_args(args) -> None:
    """Every argument and ``--out`` checked before the model loads (a bad one is a one-line error,
    not a traceback after minutes of scanning); a setting of the study config against the schema's
    bounds, as the pipeline's validation checks it."""
    from .config.schema import check_setting
    from .errors import ConfigError

    for flag, key in SCAN_SETTINGS:
        check_setting(key, getattr(args, dest(flag)), flag)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {args.out} exists and is not a directory")
    if out.is_dir() and any(p.name not in SCAN_FILES for p in out.iterdir()):
        raise ConfigError(f"--out {args.out} holds files that gna scan does not write (it replaces the whole "
                          f"directory): give a new or empty directory, or a former gna scan output")
    if getattr(args, "html_prompts", 1) < 1 or getattr(args, "html_top", 1) < 1:
        raise ConfigError("--html-prompts and --html-top must be at least 1")
    for other in getattr(args, "compare", None) or ():
        if not (Path(other) / "patterns.json").is_file():
            raise ConfigError(f"--compare {other}: no patterns.json there (an output of gna scan --html)")
    # DIR is written as a temporary directory beside it, then renamed: its parent must take one
    # (tried, not inferred from the mode bits: root passes os.access on /proc, a read-only mount...).
    parent = next(p for p in out.resolve().parents if p.exists())
    if not parent.is_dir():
        raise ConfigError(f"--out {args.out}: {parent} is not a directory")
    where = out.resolve().parent if out.resolve().parent.is_dir() else parent
    try:
        Path(tempfile.mkdtemp(prefix=".gna-scan-", dir=where)).rmdir()
    except OSError as e:
        raise ConfigError(f"--out {args.out}: cannot create a directory in {where}: {e.strerror}") from None
    from .jobs.devices import check_device

    args.device = check_device(args.device, key="--device")  # before the model loads, naming the flag typed


def cmd_scan(args) -> int:
    import torch

    from .experiments.head_scan import head_scan
    from .models import load_model
    from .report import heatmaps
    from .scan.probe_size import probe_size_warning

    check_scan_args(args)
    if warning := probe_size_warning(args.method, args.pairs, args.n_examples):
        print(warning, file=sys.stderr, flush=True)   # at the start: before minutes of scanning
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    name = args.name or _model_name(args.model)
    model, tok = load_model(_spec(args))
    examples = _scan_probe(args, tok, name)
    print(scan_estimate(model, tok, examples, args), file=sys.stderr, flush=True)  # before the scan's minutes
    result = head_scan(model, tok, examples, model_name=name, method=args.method, batch_size=args.batch_size,
                       max_rows=args.max_rows, shared_prefix=args.shared_prefix, classify_top=args.classify_top,
                       classify_examples=args.classify_examples, threshold=args.threshold,
                       probe_check=dict(max_unknown_share=args.max_unknown_share,
                                        min_over_chance=args.min_over_chance, force=args.force),
                       atp=dict(candidates=args.candidates, guard_sample=args.guard_sample, guard_k=args.guard_k,
                                guard_level=args.guard_level, atp_score=args.atp_score, graddrop=args.graddrop,
                                seed=args.seed),
                       what=f"the KV probe ({args.format} format, {args.pairs} pairs, separator {args.separator!r})",
                       say=lambda line: print(line, file=sys.stderr, flush=True))
    # As workflow/scripts/ga_heatmaps.py does: the top Gather / Aggregate head on the first prompt.
    prompt = examples[0]["prompt"]
    patterns = heatmaps.head_patterns(model, tok, prompt, result.ga)
    tokens = tok.convert_ids_to_tokens(tok(prompt)["input_ids"])
    written = _write_scan(args, name, model, tok, examples, result, patterns, tokens)
    _print_scan(args, name, examples, result, patterns)
    print("wrote " + ", ".join(str(Path(args.out) / p.name) for p in written))
    return 0


def _scan_probe(args, tok, name: str) -> list[dict]:
    """The scan's KV probe examples; ``--values auto``: the paper's 0-99 unless the tokenizer would make
    one value a prefix of another."""
    from .probes.kv import generate_kv_probe
    from .probes.values import choose_rule

    values = args.values
    if values == "auto":
        prompt = generate_kv_probe(1, 1, args.seed, separator=args.separator, fmt=args.format)[0]["prompt"]
        values = choose_rule(tok, prompt, args.separator, what=name)
    return generate_kv_probe(args.pairs, args.n_examples, args.seed, separator=args.separator, fmt=args.format,
                             values=values)


def _write_scan(args, name, model, tok, examples, result, patterns, tokens) -> list[Path]:
    """Everything into ``--out``, written into a temporary directory renamed to it at the end: a failing
    run leaves it as it was. -> the files written."""
    import pandas as pd

    from .errors import ConfigError
    from .io import atomic_path, write_csv
    from .probes.kv import write_jsonl
    from .report import explorer, heatmaps
    from .report.common import save_figure

    out, ranking, ga = Path(args.out), result.ranking, result.ga
    try:
        with atomic_path(out, directory=True) as tmp:
            written = [write_jsonl(examples, tmp / "probe.examples.jsonl"), write_csv(ranking, tmp / "ranking.csv"),
                       write_csv(ga, tmp / "ga.csv")]
            for role, (head, mat) in patterns.items():
                if mat is not None:
                    rows = heatmaps.heatmap_rows(role, head, mat, tokens)
                    written.append(write_csv(pd.DataFrame(rows), tmp / f"heatmap_{role}.csv"))
            save_figure(heatmaps.figure({name: patterns}, {name: tokens}), tmp / "heatmaps.png")
            written.append(tmp / "heatmaps.png")
            if args.html:
                probe = f"{args.format} format, {args.pairs} pairs, separator {args.separator!r}, seed {args.seed}"
                written += explorer.scan_files(name, model, tok, examples, ranking, ga, tmp, top=args.html_top,
                                               n_prompts=args.html_prompts, probe=probe, compare=args.compare)
    except OSError as e:  # whatever the filesystem says (full, read-only, gone, not a directory): one line
        raise ConfigError(f"--out {args.out}: cannot write {e.filename or out}: {e.strerror or e}") from None
    return written


def top_heads_table(ranking, ga, classify_top: int | None = None) -> str:
    """The scan's top heads as ``gna scan`` prints them: the classified heads (``ga.csv``), else the ranking's
    top ``classify_top``; at most ten rows, three decimals."""
    shown = ga if len(ga) else ranking.head(classify_top or 10)
    cols = [c for c in ("rank", "layer", "head", "kind", "accuracy", "drop", "role") if c in shown]
    return shown[cols].head(10).to_string(index=False, float_format=lambda v: f"{v:.3f}")


def _print_scan(args, name: str, examples, result, patterns) -> None:
    """The scan in a few lines: its baseline, the probe check, the guard, the top heads and their roles."""
    ranking, ga, checked = result.ranking, result.ga, result.probe
    print(f"{name}: KV probe of {len(examples)} prompts x {args.pairs} pairs ({args.format}); "
          f"baseline accuracy {ranking.baseline_accuracy.iloc[0]:.3f} (chance {checked.chance_accuracy:.3f})")
    if checked.forced and checked.problems():
        print(f"forced (--force): {'; '.join(checked.problems())}; ranking.csv records probe_check = forced")
    elif checked.forced:
        print("--force: not needed, the probe passed its check; ranking.csv records probe_check = passed")
    print(result.guard.summary())
    print(top_heads_table(ranking, ga, args.classify_top))
    for role, (head, _) in patterns.items():
        print(f"top {role} head: " + (f"L{head[0]}H{head[1]} ({head[2]})" if head else
                                      f"none among the top {len(result.top)} heads"))


def scan_estimate(model, tok, examples, args) -> str:
    """The plan's estimate of this scan, one line (gna.plan.one_scan), from ``gna scan``'s options."""
    from .plan.one_scan import scan_estimate_line
    tokens = round(sum(len(tok(e["prompt"])["input_ids"]) for e in examples[:16]) / max(1, len(examples[:16])))
    settings = {k: getattr(args, k) for k in ("batch_size", "max_rows", "classify_top", "classify_examples",
                                              "method", "candidates", "guard_sample", "graddrop")}
    return scan_estimate_line(_model_name(args.model), model.config.to_dict(), family=args.family,
                              dtype=args.dtype or default_dtype(args.device), device=args.device,
                              n_examples=len(examples), tokens=tokens, n_pairs=args.pairs, **settings)


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="a Hugging Face id (from the local cache when offline) or a "
                   "local directory holding config.json and the weights")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="weights' dtype (default: bfloat16 on CUDA, float32 elsewhere; log-probs are float32 either way)")
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
    c = sub.add_parser("convert-gguf", help="dequantize a GGUF checkpoint into a model directory", description=(
        "Dequantize GGUF (llama.cpp's format) once into a safetensors model directory, as the gguf_model rule does; "
        "refused before any weight is read: not GGUF, truncated, an architecture transformers cannot load."))
    c.add_argument("gguf", metavar="GGUF")
    c.add_argument("--out", required=True, metavar="DIR", help="the model directory (written all at once)")
    c.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    c.set_defaults(run=cmd_convert_gguf)
    _scan_parser(sub)
    _export_parser(sub)
    return top


def _scan_parser(sub) -> None:
    """``gna scan``'s options: the study config's settings among them as the schema states them."""
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
    groups = {"kv_probe": s.add_argument_group("KV probe (gna.probes.kv; the study config's kv_probe.*)"),
              "scan": s.add_argument_group("scan and G&A roles (the study config's scan.*)"),
              "scan.probe_check": s.add_argument_group("probe check: before ranking, does the probe mean anything "
                                                       "for the model? (scan.probe_check.*)")}
    for flag, key in SCAN_SETTINGS:
        setting_option(groups[key.rpartition(".")[0]], flag, key)
    groups["kv_probe"].add_argument("--values", choices=["auto", "0-99", "10-99"], default="auto",
                                    help="the numbers the values are drawn from (gna.probes.values; the study "
                                    "config's models.<name>.kv_values): auto picks 0-99 (the paper's) unless the "
                                    "model's tokenizer would make one value a prefix of another ('7' of '72', "
                                    "which could then never be chosen), then 10-99 (default: %(default)s)")
    groups["scan"].add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    g = s.add_argument_group("head explorer (gna.report.explorer)")
    g.add_argument("--html", action="store_true", help="also write explorer.html, one self-contained page (no "
                   "network): the ranking as a sortable, filterable table and the top heads' mixing patterns on "
                   "several prompts (hover a token to see what it reads), and patterns.json (its data)")
    g.add_argument("--html-prompts", type=int, default=3, help="probe prompts shown per head (default: %(default)s)")
    g.add_argument("--html-top", type=int, default=8, help="top heads whose patterns are shown, besides every "
                   "Gather and Aggregate head (default: %(default)s)")
    g.add_argument("--compare", action="append", metavar="DIR", help="another gna scan --html output to offer "
                   "beside this model in the page (repeatable)")
    s.set_defaults(run=cmd_scan)


def _export_parser(sub) -> None:
    e = sub.add_parser("export", help="a ranking's top k as goombalab/mohawk's architecture YAML and head map",
                       description="Write, for each K, architecture_K.yaml (mohawk's per-layer attention head counts in "
                       "blocks of consecutive layers, a '# layer = [heads] -> n' comment per layer) and heads_K.txt "
                       "(the --heads argument of mohawk's tools/hybrid_weights_transfer.py, layer:head in rank order) "
                       "from RANKING, a ranking.csv of gna scan or the pipeline. Attention heads only.")
    e.add_argument("ranking", metavar="RANKING", help="ranking CSV (columns rank, layer, head, kind)")
    e.add_argument("--k", type=int, nargs="+", required=True, help="heads kept (one file pair per value)")
    e.add_argument("--out", required=True, metavar="DIR", help="output directory")
    e.add_argument("--model", help="the ranked model (directory or hub id with a shipped config): layers and head width")
    e.add_argument("--n-layers", type=int, help="layers of the model (default: its config's)")
    e.add_argument("--head-dim", type=int, help="attention head width (default: its config's)")
    e.add_argument("--name", help="ARCH_NAME's prefix (default: the model's or the ranking's name)")
    e.set_defaults(run=cmd_export)


def cmd_export(args) -> int:
    """``gna export``: gna.questions.mohawk.export of a ranking CSV, the files written into --out."""
    from .errors import ConfigError
    from .io import write_text
    from .questions.mohawk import export, model_head_dim, read_ranking

    ranking = read_ranking(args.ranking)
    n_attention = int((ranking.kind == "attention").sum())
    bad_k = [k for k in args.k if not 0 <= k <= n_attention]
    if bad_k and n_attention:
        raise ConfigError(f"--k {' '.join(map(str, bad_k))}: outside 0..{n_attention}, the attention heads of "
                          f"{args.ranking}")
    if args.n_layers is None and args.model is None:
        raise ConfigError("give --model (its config.json has the layers and head width) or --n-layers and --head-dim")
    cfg = None
    if args.model is not None:
        from .config.architectures import config_of

        cfg = config_of(args.model) or {}
    n_layers = args.n_layers or int(cfg.get("num_hidden_layers") or 0)
    if n_layers < 1:
        raise ConfigError(f"no layer count in the config of {args.model!r}: give --n-layers")
    if args.head_dim is None and args.model is None:
        raise ConfigError("give --head-dim or --model")
    head_dim = args.head_dim or model_head_dim(args.model)
    name = args.name or _model_name(args.model or Path(args.ranking).stem.split(".")[0])
    files = {fname: text for k in args.k for fname, text in export(ranking, k, n_layers, head_dim, name).items()}
    for fname, text in files.items():  # every k exported before the first file is written
        write_text(text, Path(args.out) / fname)
        print(Path(args.out) / fname)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gna`` console script; returns the exit status."""
    from .errors import GnaError, user_os_error

    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except GnaError as e:  # a problem with the input, named in the message: no traceback
        print(f"gna {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: outputs are renamed into place at the end, so nothing is half-written
        # on a line of its own: a progress bar leaves the cursor after its last update
        print(f"\ngna {args.command}: interrupted; nothing written", file=sys.stderr)
        return 130
    except OSError as e:
        if not user_os_error(e):
            raise
        print(f"gna {args.command}: error: cannot write {e.filename or getattr(args, 'out', '')}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
