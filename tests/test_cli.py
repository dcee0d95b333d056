"""The ``gna`` console script: ``gna describe`` and ``gna scan`` on the shipped micro transformer and
on Hugging Face-layout directories, and ``gna scan`` equals the pipeline's head_scan rule."""
import logging
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gna.cli import main

ROOT = Path(__file__).resolve().parents[1]
MICRO_LLAMA = str(ROOT / "data/models/micro-llama")
GNA = Path(sys.executable).parent / "gna"  # the console script pip installed beside this python
# Small probe: 16 prompts of 4 pairs; the micro models read the compact format.
PROBE = dict(n_examples=16, n_pairs=4, seed=0, fmt="compact", separator=" ")
SCAN = dict(batch_size=8, max_rows=64, classify_top=4, classify_examples=4, threshold=0.3, method="exact")
ATP = dict(candidates=6, guard_sample=4, guard_k=3, guard_level=0.25, atp_score="margin", graddrop=False,
           seed=PROBE["seed"])


class Named(dict):
    """Snakemake's Namedlist for the pipeline scripts: items by attribute, and ``dict()`` works."""
    __getattr__ = dict.__getitem__


class Files(list):
    """Snakemake's input/output: a list whose named items are attributes too."""

    def __init__(self, files):
        named = files if isinstance(files, dict) else {}
        super().__init__(named.values() if named else files)
        self.__dict__.update(named)


class FakeSnakemake:
    """The ``snakemake`` object a rule's script sees, enough for gna.jobs.script_job.job."""

    def __init__(self, rule, log, input=(), output=(), params=(), wildcards=(), config=None):
        Path(log).parent.mkdir(parents=True, exist_ok=True)  # Snakemake creates a log's folder
        self.rule, self.log, self.threads = rule, [str(log)], 1
        self.input, self.output = Files(input), Files(output)
        self.params, self.wildcards = Named(params), Named(wildcards)
        self.config = config or {}


def run_script(name: str, smk: FakeSnakemake) -> None:
    """Run ``workflow/scripts/<name>.py`` as Snakemake's ``script:`` directive does."""
    try:
        runpy.run_path(str(ROOT / "workflow/scripts" / f"{name}.py"), init_globals={"snakemake": smk})
    finally:  # job() pointed logging at the rule's (now closed) log file
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)


def pipeline_scan(model_path: str, name: str, work: Path, force: bool = False, method: str = "exact") -> Path:
    """The pipeline's kv_probe then head_scan rules on ``model_path``; returns results/scan.
    ``force``: scan.probe_check.force (a random-init model is at chance)."""
    probe = work / "results/probes/kv-compact-n4-s0-space.examples.jsonl"
    run_script("kv_probe", FakeSnakemake(
        "kv_probe", work / "logs/probe.log", output=[str(probe)],
        params=dict(n_examples=PROBE["n_examples"], separator=PROBE["separator"]),
        wildcards=dict(fmt=PROBE["fmt"], n_pairs=str(PROBE["n_pairs"]), seed=str(PROBE["seed"]), sep="space",
                       values_tag="")))
    out = work / "results/scan"
    run_script("head_scan", FakeSnakemake(
        "head_scan", work / "logs/scan.log", input=dict(model=model_path, probe=str(probe)),
        output=dict(ranking=str(out / f"{name}.ranking.csv"), ga=str(out / f"{name}.ga.csv")),
        params=dict(spec={"path": model_path, "dtype": "float32", "device": "cpu"}, **{**SCAN, "method": method},
                    atp=ATP, probe_check=dict(max_unknown_share=0.05, min_over_chance=0.05, force=force)),
        wildcards=dict(model=name, scan_dir="scan")))
    return out


def cli_scan(model_path: str, out: Path, *extra: str) -> int:
    return main(["scan", model_path, "--out", str(out), "--format", PROBE["fmt"], "--n-examples",
                 str(PROBE["n_examples"]), "--pairs", str(PROBE["n_pairs"]), "--seed", str(PROBE["seed"]),
                 "--separator", PROBE["separator"], "--batch-size", str(SCAN["batch_size"]), "--max-rows",
                 str(SCAN["max_rows"]), "--classify-top", str(SCAN["classify_top"]), "--classify-examples",
                 str(SCAN["classify_examples"]), *extra])


def test_console_script_describes_the_micro_transformer():
    out = subprocess.run([str(GNA), "describe", MICRO_LLAMA], capture_output=True, text=True,
                         env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("LlamaForCausalLM (model_type llama), adapter attention: 6 layers, 6 mixers, 24 heads")
    assert lines[1].split() == ["layer", "kind", "n_heads", "head_dim", "kv_heads", "heads_per_kv", "heads_live_in",
                                "(input", "of)"]
    rows = [line.split() for line in lines[2:]]
    assert rows == [[str(i), "attention", "4", "16", "4", "1", f"model.layers.{i}.self_attn.o_proj"] for i in range(6)]


def test_console_script_help_names_every_option():
    out = subprocess.run([str(GNA), "scan", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for opt in ("--out", "--n-examples", "--pairs", "--separator", "--format", "--seed", "--classify-top",
                "--classify-examples", "--dtype", "--device", "--batch-size"):
        assert opt in out.stdout


@pytest.mark.parametrize("family,options,expected", [
    # grouped-query attention: 4 query heads, 2 K/V heads, 2 query heads per K/V
    ("qwen2", [], ["0", "attention", "4", "8", "2", "2", "model.layers.0.self_attn.o_proj"]),
    # Mamba-1: 64 inner channels in groups of 16 = 4 heads of width 16, no K/V
    ("mamba1", ["--channel-group", "16"], ["0", "mamba1", "4", "16", "-", "-", "backbone.layers.0.mixer.out_proj"]),
])
def test_describe_a_hugging_face_directory(tiny_model_dir, capsys, family, options, expected):
    assert main(["describe", tiny_model_dir(family), *options]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 2 and lines[2].split() == expected  # header, column names, 2 layers


@pytest.mark.parametrize("which,method", [("micro-llama", "exact"), ("tiny-zamba2", "exact"),
                                          ("micro-llama", "atp+exact")])
def test_scan_equals_the_pipelines_head_scan(tiny_model_dir, tmp_path, which, method):
    """Same probe file, same ranking and roles, byte for byte, as the head_scan rule's script."""
    model_path = MICRO_LLAMA if which == "micro-llama" else tiny_model_dir("zamba2")
    name, force = Path(model_path).name, which != "micro-llama"  # a random-init model scores at chance
    atp = ["--method", method, "--candidates", str(ATP["candidates"]), "--guard-sample", str(ATP["guard_sample"]),
           "--guard-k", str(ATP["guard_k"])]
    assert cli_scan(model_path, tmp_path / "cli", "--name", name, *atp, *["--force"] * force) == 0
    scan = pipeline_scan(model_path, name, tmp_path / "pipeline", force=force, method=method)
    cli = tmp_path / "cli"
    probe = tmp_path / "pipeline/results/probes/kv-compact-n4-s0-space.examples.jsonl"
    assert (cli / "probe.examples.jsonl").read_bytes() == probe.read_bytes()
    ranking = pd.read_csv(cli / "ranking.csv")
    assert len(ranking) > 4 and ranking.logprob_drop.nunique() > 4  # a real ranking, not a constant table
    if method == "atp+exact":  # the candidates and the guard's sample ablated, the rest ranked by the estimate
        # (at least guard_sample drawn: the guard draws on until its bound meets scan.guard_level)
        assert ranking.exact.sum() >= ATP["candidates"] + ATP["guard_sample"] and ranking.atp_drop.notna().all()
    assert (cli / "ranking.csv").read_bytes() == (scan / f"{name}.ranking.csv").read_bytes()
    assert (cli / "ga.csv").read_bytes() == (scan / f"{name}.ga.csv").read_bytes()


def test_scan_writes_heatmaps_of_the_top_gather_and_aggregate_heads(tmp_path, capsys):
    assert cli_scan(MICRO_LLAMA, tmp_path) == 0
    printed = capsys.readouterr().out
    ga = pd.read_csv(tmp_path / "ga.csv")
    assert len(ga) == SCAN["classify_top"] and set(ga.role) <= {"gather", "aggregate", "-"}
    assert (tmp_path / "heatmaps.png").stat().st_size > 10_000
    assert "micro-llama: KV probe of 16 prompts x 4 pairs (compact)" in printed
    for role in ("gather", "aggregate"):
        hits = ga[ga.role == role].sort_values("rank")
        path = tmp_path / f"heatmap_{role}.csv"
        if hits.empty:
            assert not path.exists() and f"top {role} head: none" in printed
            continue
        top = hits.iloc[0]
        heat = pd.read_csv(path, keep_default_na=False)
        assert set(heat.role) == {role} and (heat.layer == top.layer).all() and (heat["head"] == top["head"]).all()
        assert f"top {role} head: L{top.layer}H{top['head']} (attention)" in printed
        assert (heat.key_pos <= heat.query_pos).all()
        # attention: every query row is a softmax over the keys before it
        assert heat.groupby("query_pos").weight.sum().sub(1).abs().max() < 1e-5
        T = heat.query_pos.max() + 1
        assert len(heat) == T * (T + 1) // 2 and heat.query_token.iloc[-1] == "?"


def test_scan_on_a_hugging_face_directory_through_the_console_script(tiny_model_dir, tmp_path):
    out = subprocess.run([str(GNA), "scan", tiny_model_dir("mamba2"), "--out", str(tmp_path / "o"), "--format",
                          "compact", "--n-examples", "8", "--pairs", "4", "--classify-top", "3",
                          "--classify-examples", "2", "--threads", "1", "--force"],
                         capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "head scan" in out.stderr  # the scan's tqdm progress bar
    ranking = pd.read_csv(tmp_path / "o/ranking.csv")
    assert set(ranking.kind) == {"mamba2"} and list(ranking["rank"]) == list(range(1, len(ranking) + 1))
    assert len(pd.read_csv(tmp_path / "o/ga.csv")) == 3


def test_the_command_and_the_rule_run_one_scan_routine(tmp_path, monkeypatch):
    """Both go through gna.experiments.head_scan.head_scan, with the same settings, and get the typed
    guard back (not a second copy of the steps kept in step by hand)."""
    import dataclasses

    import gna.experiments.head_scan as routine
    from gna.scan import ScanGuard

    calls = []
    real = routine.head_scan

    def recorded(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(({k: v for k, v in kwargs.items() if k not in ("say", "what")}, result))
        return result

    monkeypatch.setattr(routine, "head_scan", recorded)
    atp = ["--candidates", str(ATP["candidates"]), "--guard-sample", str(ATP["guard_sample"]), "--guard-k",
           str(ATP["guard_k"])]
    assert cli_scan(MICRO_LLAMA, tmp_path / "cli", "--name", "micro-llama", *atp) == 0
    pipeline_scan(MICRO_LLAMA, "micro-llama", tmp_path / "pipeline")
    assert len(calls) == 2
    (cli_settings, cli_result), (rule_settings, rule_result) = calls
    assert cli_settings["atp"] == ATP and rule_settings["atp"] == ATP  # the pipeline passes scan.* as the rule does
    assert {k: v for k, v in cli_settings.items() if k != "probe_check"} == \
           {k: v for k, v in rule_settings.items() if k != "probe_check"}
    for result in (cli_result, rule_result):
        assert isinstance(result.guard, ScanGuard) and dataclasses.is_dataclass(result.guard)
        assert result.guard.summary() == f"exact: all {len(result.ranking)} heads ablated"
    assert cli_result.ranking.equals(rule_result.ranking) and cli_result.ga.equals(rule_result.ga)
