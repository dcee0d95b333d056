"""What a careless user meets, each ending in one line that names the problem, before any work where it
can be: a key given twice in a config file, a file that is no ranking given to ``gna export``, Ctrl-C
during ``gna scan``, an architecture no adapter describes, a model path that is a file, sizes that
cannot finish."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gna.cli import main
from gna.config.checks import StudyConfigError

ROOT = Path(__file__).resolve().parents[1]
MICRO_LLAMA = str(ROOT / "data/models/micro-llama")
GNA = Path(sys.executable).parent / "gna"


def one_line(err: str, start: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(start), err
    return lines[0]


# -- a key given twice -----------------------------------------------------------------------------

def test_a_key_given_twice_is_refused_with_the_file_and_line(tmp_path):
    from gna.config.study import check_yaml_file

    study = tmp_path / "study.yaml"
    study.write_text("study: micro\nmodels:\n  micro-llama: {family: llama}\n  micro-mamba2: {family: mamba2}\n"
                     "  micro-llama: {family: mamba2}\n")
    with pytest.raises(StudyConfigError, match=rf"config error: {study} line 5: key 'micro-llama' is given twice in "
                                               r"one mapping \(first at line 3\)"):
        check_yaml_file(study)
    merged = tmp_path / "merged.yaml"  # a merge key's values may be overridden: not a repetition
    merged.write_text("base: &b {x: 1, y: 2}\nstudy:\n  <<: *b\n  x: 3\n")
    check_yaml_file(merged)


def test_a_preset_with_a_key_given_twice_fails_the_dry_run_in_one_line(tmp_path):
    preset = tmp_path / "smoke.yaml"
    text = (ROOT / "workflow/configs/smoke.yaml").read_text()
    preset.write_text(text + "seed: 7\n")  # smoke.yaml sets seed already
    line = len(text.splitlines()) + 1
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path / "work"), "--configfile", str(preset), "-n", "--cores", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "SLURM_CONF": "/dev/null"})
    assert out.returncode == 1
    one_line(out.stderr, f"config error: {preset} line {line}: key 'seed' is given twice")


# -- gna export ------------------------------------------------------------------------------------

@pytest.mark.parametrize("ranking,extra,message", [
    (ROOT / "config.yaml", ["--k", "3"], "is not a head ranking (a CSV with columns rank, layer, head, kind)"),
    ("bad-layer", ["--k", "1"], "line 3: layer 'x' is not a whole number"),
    ("24 heads", ["--k", "2", "-1", "99"], "--k -1 99: outside 0..24, the attention heads of"),
])
def test_gna_export_says_each_bad_input_in_one_line_and_writes_nothing(tmp_path, capsys, ranking, extra, message):
    if ranking == "bad-layer":
        ranking = tmp_path / "bad.ranking.csv"
        ranking.write_text("rank,layer,head,kind\n1,3,3,attention\n2,x,2,attention\n")
    elif ranking == "24 heads":  # micro-llama's shape: 6 layers of 4 heads
        ranking = tmp_path / "micro.ranking.csv"
        ranking.write_text("rank,layer,head,kind\n" + "".join(f"{6 * layer + head + 1},{layer},{head},attention\n"
                                                               for layer in range(6) for head in range(4)))
    code = main(["export", str(ranking), *extra, "--out", str(tmp_path / "out"), "--n-layers", "6", "--head-dim", "16"])
    assert code == 2 and message in one_line(capsys.readouterr().err, "gna export: error: ")
    assert not (tmp_path / "out").exists()


# -- Ctrl-C ----------------------------------------------------------------------------------------

def test_ctrl_c_during_gna_scan_is_one_line_and_exit_130(tmp_path):
    out = tmp_path / "o"
    proc = subprocess.Popen([str(GNA), "scan", MICRO_LLAMA, "--out", str(out), "--format", "compact", "--n-examples",
                             "4000", "--pairs", "8", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    seen, deadline = b"", time.monotonic() + 300
    while b"head scan" not in seen and time.monotonic() < deadline:  # the scan's progress bar: mid-scan
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
    assert b"head scan" in seen, seen.decode(errors="replace")[-2000:]
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    err = (seen + rest).decode(errors="replace")
    assert proc.returncode == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "gna scan: interrupted; nothing written"
    assert not out.exists() and not list(tmp_path.glob(".gna-scan-*"))


# -- architectures no adapter describes, from config.json alone --------------------------------------

def config_only(tmp_path, name: str, config: dict) -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return str(d)  # no weights: refused before any would be read


@pytest.mark.parametrize("model_type,arch,reason", [
    ("bert", "BertForMaskedLM", "an encoder (BERT-style)"),
    ("gpt_neox", "GPTNeoXForCausalLM", "gpt_neox.layers[i].attention.dense"),
])
def test_a_refused_architecture_is_refused_from_its_config_before_any_weight(tmp_path, capsys, model_type, arch,
                                                                            reason):
    from gna.errors import UnknownArchitectureError
    from gna.models import load_model

    path = config_only(tmp_path, model_type, {"model_type": model_type, "architectures": [arch]})
    with pytest.raises(UnknownArchitectureError, match=rf"unsupported architecture {arch} \(model_type "
                                                       rf"'{model_type}'\): .*supported families"):
        load_model({"path": path})
    assert main(["describe", path]) == 2
    assert reason in one_line(capsys.readouterr().err, f"gna describe: error: unsupported architecture {arch}")


def test_an_unknown_model_type_gets_the_projects_message_not_an_upgrade_advice(tmp_path, capsys):
    path = config_only(tmp_path, "unknown", {"model_type": "no_such_type", "architectures": ["NoSuchForCausalLM"]})
    assert main(["describe", path]) == 2
    line = one_line(capsys.readouterr().err, "gna describe: error: unsupported architecture NoSuchForCausalLM "
                                             "(model_type 'no_such_type')")
    assert "has no model type 'no_such_type'" in line and "upgrade" not in line.lower()


# -- a model path that is a file -------------------------------------------------------------------

def test_a_study_model_path_that_is_a_file_is_said_to_be_a_file(tmp_path):
    from gna.config.checks import structure

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0" * 64)
    with pytest.raises(StudyConfigError, match=rf"config error: models.mine.path = '{weights}': '{weights}' is a "
                                               r"file, not a model directory"):
        structure({"path": str(weights)}, str(weights), "mine")


# -- sizes that cannot finish ----------------------------------------------------------------------

@pytest.mark.parametrize("key,value", [("kv_probe.n_examples", 1_000_000_000), ("scan.classify_examples", 10**9)])
def test_a_probe_size_that_cannot_finish_is_refused_by_the_schema(key, value):
    import yaml

    from gna.config.schema import with_defaults

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    section, name = key.split(".")
    config[section][name] = value
    with pytest.raises(Exception, match=r"is greater than the maximum of 100000"):
        with_defaults(config)
    from gna.config.schema import check_setting  # the command's check reads the same bound

    with pytest.raises(Exception, match=rf"{key} {value} is outside 1..100000"):
        check_setting(key, value)
