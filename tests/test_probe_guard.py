"""A ranking that means nothing is refused, and ``gna scan`` checks its arguments
and ``--out`` before loading the model and writes ``--out`` all at once (item 3).

The case of the issue: ``gna scan data/models/micro-llama`` with the paper's prompt format: 58% of
the prompt tokens are ``<unk>`` for the micro tokenizer and the baseline sits at chance."""
import errno
import os
import subprocess
import sys

import pandas as pd
import pytest

from gna import io
from gna.cli import main, parser
from gna.config.schema import defaults_of
from gna.errors import ProbeError
from gna.probes import guard
from test_cli import GNA, MICRO_LLAMA, FakeSnakemake, run_script

FAST = ["--n-examples", "20", "--classify-top", "2", "--classify-examples", "2"]


def one_line_error(err: str, start: str) -> str:
    """The error line of a terminal's stderr (tqdm bars of the model's loading aside); no traceback."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("gna ")]
    assert len(lines) == 1 and lines[0].startswith(start), err
    return lines[0]


def test_the_guard_defaults_are_the_schemas_and_the_clis():
    assert guard.DEFAULTS == defaults_of("scan.probe_check")
    scan = parser().parse_args(["scan", "m", "--out", "o"])
    assert (scan.max_unknown_share, scan.min_over_chance, scan.force) == tuple(guard.DEFAULTS.values())


def test_gna_scan_refuses_a_probe_the_model_cannot_read(tmp_path):
    out = subprocess.run([str(GNA), "scan", MICRO_LLAMA, "--out", str(tmp_path / "o"), *FAST],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    assert out.returncode == 2
    line = one_line_error(out.stderr, "gna scan: error: the KV probe (paper format, 20 pairs")
    assert "% of the prompts' tokens are the tokenizer's unknown token" in line
    assert "is not above chance 0.050" in line
    for remedy in ("--format compact", "--separator", "--pairs", "a model that can do the task", "--force"):
        assert remedy in line
    assert not (tmp_path / "o").exists() and "head scan" not in out.stderr  # stopped before the scan


def test_a_forced_scan_runs_and_records_it(tmp_path, capsys):
    assert main(["scan", MICRO_LLAMA, "--out", str(tmp_path / "o"), *FAST, "--force"]) == 0
    assert "forced (--force): " in capsys.readouterr().out
    ranking = pd.read_csv(tmp_path / "o/ranking.csv")
    assert set(ranking.probe_check) == {"forced"} and ranking.unknown_share.iloc[0] > 0.5
    assert (ranking.chance_accuracy == 0.05).all() and (ranking.max_unknown_share == 0.05).all()


def test_the_pipelines_head_scan_stops_before_ranking(tmp_path):
    from gna.probes.kv import generate_kv_probe, write_jsonl

    probe = write_jsonl(generate_kv_probe(20, 20, 0, fmt="paper"), tmp_path / "probe.jsonl")
    out = tmp_path / "results/scan"
    smk = FakeSnakemake("head_scan", tmp_path / "logs/scan.log", input=dict(model=MICRO_LLAMA, probe=str(probe)),
                        output=dict(ranking=str(out / "m.ranking.csv"), ga=str(out / "m.ga.csv")),
                        params=dict(spec={"path": MICRO_LLAMA, "dtype": "float32", "device": "cpu"}, batch_size=8,
                                    max_rows=64, classify_top=2, classify_examples=1, threshold=0.3,
                                    probe_check=guard.DEFAULTS, method="exact", atp={}),
                        wildcards=dict(model="m", scan_dir="scan"))
    with pytest.raises(ProbeError, match=r"KV probe .*probe.jsonl \(scan.probe_check\) means nothing.*kv_probe.format"):
        run_script("head_scan", smk)
    assert not out.exists()
    assert "head scan" not in (tmp_path / "logs/scan.log").read_text()


@pytest.mark.parametrize("args,message", [
    (["--pairs", "0"], "--pairs 0 is outside 1..100"),
    (["--n-examples", "0"], "--n-examples 0 is outside 1..100000"),
    (["--n-examples", "1000000000"], "--n-examples 1000000000 is outside 1..100000"),
    (["--min-over-chance", "2"], "--min-over-chance 2.0 is outside 0..1"),
])
def test_bad_arguments_are_refused_before_the_model_loads(tmp_path, capsys, args, message):
    # the model does not exist: the argument is checked first
    assert main(["scan", str(tmp_path / "no-model"), "--out", str(tmp_path / "o"), *args]) == 2
    one_line_error(capsys.readouterr().err, f"gna scan: error: {message}")


def test_an_out_that_is_a_file_or_a_foreign_directory_is_refused_before_the_model_loads(tmp_path, capsys):
    (tmp_path / "file").write_text("mine")
    assert main(["scan", str(tmp_path / "no-model"), "--out", str(tmp_path / "file")]) == 2
    one_line_error(capsys.readouterr().err, f"gna scan: error: --out {tmp_path / 'file'} exists and is not a directory")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine/notes.txt").write_text("mine")
    assert main(["scan", str(tmp_path / "no-model"), "--out", str(tmp_path / "mine")]) == 2
    one_line_error(capsys.readouterr().err, f"gna scan: error: --out {tmp_path / 'mine'} holds files")
    assert (tmp_path / "mine/notes.txt").read_text() == "mine"


def test_an_out_that_cannot_be_written_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("mine")
    assert main(["scan", str(tmp_path / "no-model"), "--out", str(tmp_path / "file/o")]) == 2
    one_line_error(capsys.readouterr().err, f"gna scan: error: --out {tmp_path / 'file/o'}: {tmp_path / 'file'} is "
                                            "not a directory")

    def refused(**kwargs):  # as a user without write permission (root may write anywhere)
        raise PermissionError(13, "Permission denied", kwargs.get("dir"))

    monkeypatch.setattr("gna.cli.tempfile.mkdtemp", refused)
    assert main(["scan", str(tmp_path / "no-model"), "--out", str(tmp_path / "o")]) == 2
    one_line_error(capsys.readouterr().err, f"gna scan: error: --out {tmp_path / 'o'}: cannot create a directory in "
                                            f"{tmp_path}: Permission denied")


def test_a_full_disk_leaves_out_as_it_was(tmp_path, capsys, monkeypatch):
    """The 4th file fails with ENOSPC: --out keeps the former scan's files, one line on the terminal."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "ranking.csv").write_text("former")
    real, calls = io.write_csv, []

    def write_csv(df, path):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(df, path)

    monkeypatch.setattr(io, "write_csv", write_csv)
    assert main(["scan", MICRO_LLAMA, "--out", str(out), "--format", "compact", "--pairs", "4", *FAST]) == 2
    one_line_error(capsys.readouterr().err, f"gna scan: error: --out {out}: cannot write ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # no temporary directory left
    assert [p.name for p in out.iterdir()] == ["ranking.csv"] and (out / "ranking.csv").read_text() == "former"


def test_the_guard_counts_unknown_tokens_only_where_the_tokenizer_has_one():
    class Tok:
        unk_token_id = 0

    class Enc:
        prompt_ids = [[1, 0, 2, 0], [0, 3]]

    assert guard.unknown_share(Enc, Tok) == 0.5
    Tok.unk_token_id = None
    assert guard.unknown_share(Enc, Tok) == 0.0
    check = guard.ProbeCheck(0.0, 0.29, 0.25, 0.05, 0.05)
    assert check.problems() == ["the model's baseline accuracy 0.290 is not above chance 0.250 by 0.05 (a ranking "
                                "would rank noise)"]
    assert guard.ProbeCheck(0.0, 0.31, 0.25, 0.05, 0.05).columns()["probe_check"] == "passed"


def test_the_compact_format_failing_on_a_pretrained_tokenizer_advises_the_papers():
    """The compact format is the micro models' (a word-level tokenizer reads it); where it fails on a
    tokenizer with no unknown tokens in the prompts (a pretrained one), the advice is to keep the
    paper's format, not to try the compact one."""
    failed = guard.ProbeCheck(unknown_share=0.0, baseline_accuracy=0.0, chance_accuracy=0.05, max_unknown_share=0.05,
                              min_over_chance=0.05)
    assert guard.advice(failed, "compact") == guard.KEEP_PAPER and "keep --format paper" in guard.KEEP_PAPER
    assert guard.advice(failed, "paper") == guard.ADVICE
    unreadable = guard.ProbeCheck(unknown_share=0.6, baseline_accuracy=0.0, chance_accuracy=0.05,
                                  max_unknown_share=0.05, min_over_chance=0.05)
    assert guard.advice(unreadable, "compact") == guard.ADVICE   # a word-level tokenizer: the usual remedies
