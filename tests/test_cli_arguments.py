"""``gna scan`` / ``gna describe`` arguments as a user types them: refused before the model loads
where the study config's schema refuses the same value, --out checked up front and any failure to
write it one line, Mamba-1's unclassified roles said before the scan, --force reporting what
happened, and messages naming the flag typed."""
import os
from pathlib import Path

import pytest

from gna.cli import main

ROOT = Path(__file__).resolve().parents[1]
MICRO_LLAMA = str(ROOT / "data/models/micro-llama")
MICRO_MAMBA1 = str(ROOT / "data/models/micro-mamba1")
SMALL = ["--format", "compact", "--n-examples", "8", "--pairs", "4", "--batch-size", "8", "--classify-top", "2",
         "--classify-examples", "2"]


def scan(capsys, *args) -> tuple[int, str, str]:
    code = main(["scan", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("flag,value,bound", [("--candidates", "0", "1.."), ("--guard-sample", "-1", "0.."),
                                              ("--guard-k", "0", "1..")])
def test_the_cli_refuses_what_the_schema_refuses_before_the_model_loads(tmp_path, capsys, flag, value, bound):
    code, out, err = scan(capsys, "no/such/model", "--out", str(tmp_path / "o"), "--method", "atp+exact", flag, value)
    assert code == 2 and err.strip() == f"gna scan: error: {flag} {value} is outside {bound}"  # the model never loaded


def test_the_library_refuses_a_guard_k_below_one_before_any_pass():
    from gna.scan.attribution_ranking import attribution_ranking
    from gna.errors import ConfigError

    with pytest.raises(ConfigError, match="scan.guard_k = -3: must be a candidate's rank"):
        attribution_ranking(None, None, "atp+exact", guard_k=-3)  # no model needed: refused first


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may try to create a directory in /proc")
def test_an_out_under_proc_is_refused_up_front_in_one_line(capsys):
    code, out, err = scan(capsys, "no/such/model", "--out", "/proc/x")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--out /proc/x: cannot create a directory in /proc" in err


def test_an_out_in_a_read_only_directory_is_refused_up_front(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, out, err = scan(capsys, "no/such/model", "--out", str(ro / "x"))
    finally:
        ro.chmod(0o700)
    if os.geteuid() == 0:  # root writes anywhere the filesystem lets it: the try succeeds, the model then fails
        assert code == 2 and "no/such/model" in err
    else:
        assert code == 2 and f"cannot create a directory in {ro}" in err


def test_a_write_failure_after_the_scan_is_one_line(tmp_path, capsys, monkeypatch):
    import gna.io

    def full(*a, **k):
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "gone"))

    monkeypatch.setattr(gna.io, "write_csv", full)
    code, out, err = scan(capsys, MICRO_LLAMA, "--out", str(tmp_path / "o"), *SMALL)
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"gna scan: error: --out {tmp_path / 'o'}: cannot write")
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_a_device_this_machine_lacks_names_the_flag(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, out, err = scan(capsys, MICRO_LLAMA, "--out", str(tmp_path / "o"), "--device", "cuda")
    assert code == 2 and err.startswith("gna scan: error: --device: cuda") and "set device" not in err
    assert main(["describe", MICRO_LLAMA, "--device", "cuda"]) == 2
    assert "--device: cuda" in capsys.readouterr().err


def test_force_on_a_probe_that_passes_says_so(tmp_path, capsys):
    code, out, err = scan(capsys, MICRO_LLAMA, "--out", str(tmp_path / "o"), *SMALL, "--force")
    assert code == 0 and "--force: not needed, the probe passed its check" in out and "forced (--force)" not in out
    import pandas as pd

    assert set(pd.read_csv(tmp_path / "o/ranking.csv")["probe_check"]) == {"passed"}


def test_mamba1_roles_are_said_unclassified_before_the_scan_and_the_scan_is_written(tmp_path, capsys):
    code, out, err = scan(capsys, MICRO_MAMBA1, "--out", str(tmp_path / "o"), *SMALL, "--channel-group", "32",
                          "--force")
    assert code == 0, err
    assert "G&A roles: mamba1 heads are ranked but not classified" in err
    import pandas as pd

    assert len(pd.read_csv(tmp_path / "o/ranking.csv")) > 0 and (tmp_path / "o/ga.csv").is_file()


def test_scan_options_take_type_default_bounds_and_help_from_the_schema(tmp_path, capsys, monkeypatch):
    """Every option that is a study setting reads the schema: change the schema and the option follows."""
    import copy

    from gna import cli
    from gna.config import schema

    options = {a.dest: a for a in cli.parser()._subparsers._group_actions[0].choices["scan"]._actions}
    for flag, key in cli.SCAN_SETTINGS:
        node, action = schema.setting(key), options[flag.lstrip("-").replace("-", "_")]
        assert action.default == cli.COMMAND_DEFAULTS.get(key, node.get("default")), flag
        assert list(action.choices or node.get("enum", [])) == node.get("enum", []) and key in action.help, flag
    edited = copy.deepcopy(schema._schema())
    edited["properties"]["scan"]["properties"]["batch_size"].update(default=7, maximum=9, description="rows now")
    monkeypatch.setattr(schema, "_schema", lambda: edited)
    scan_parser = cli.parser()._subparsers._group_actions[0].choices["scan"]
    batch = next(a for a in scan_parser._actions if a.dest == "batch_size")
    assert batch.default == 7 and batch.help.startswith("rows now; 1..9")
    code, out, err = scan(capsys, "no/such/model", "--out", str(tmp_path / "o"), "--batch-size", "10")
    assert code == 2 and err.strip() == "gna scan: error: --batch-size 10 is outside 1..9"


@pytest.mark.parametrize("flag,value,bound", [("--n-examples", "1000000000", "1..100000"),
                                              ("--guard-level", "1", "(0, 1)"),
                                              ("--classify-examples", "200000", "1..100000")])
def test_sizes_that_cannot_finish_are_refused_as_the_schema_refuses_them(tmp_path, capsys, flag, value, bound):
    code, out, err = scan(capsys, "no/such/model", "--out", str(tmp_path / "o"), flag, value)
    typed = float(value) if flag == "--guard-level" else value
    assert code == 2 and err.strip() == f"gna scan: error: {flag} {typed} is outside {bound}"


def test_on_cuda_the_weights_default_to_bf16_and_the_scan_says_its_estimate_first(tmp_path, capsys):
    """No --dtype: bfloat16 on a CUDA device, float32 elsewhere; gna scan prints the plan's estimate of
    its time (the model's shape, the probe, the device) before the scan starts."""
    from gna.cli import _spec, default_dtype, main, parser

    assert default_dtype("cuda") == default_dtype("cuda:1") == "bfloat16" and default_dtype("cpu") == "float32"
    args = parser().parse_args(["scan", "org/model", "--out", "o", "--device", "cuda:0"])
    assert args.dtype is None and _spec(args)["dtype"] == "bfloat16"
    assert _spec(parser().parse_args(["scan", "m", "--out", "o", "--dtype", "float32", "--device", "cuda"]))["dtype"] \
        == "float32"
    model = str(Path(__file__).resolve().parents[1] / "data/models/micro-llama")
    assert main(["scan", model, "--out", str(tmp_path / "o"), "--format", "compact", "--n-examples", "8",
                 "--pairs", "4", "--classify-top", "2"]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("plan estimate: "))
    assert "exact scan of 24 heads on 8 prompts" in line and "one CPU core in float32" in line
    assert err.index("plan estimate: ") < err.index("head scan")
