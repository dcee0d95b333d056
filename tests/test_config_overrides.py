"""How the study config is read: ``--config key=value`` changes a key of the study in use
(config.yaml, or the --configfile preset) with the type its text has; config errors end in one
line with no Python frames; YAML errors name the file and line."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gna.config.checks import StudyConfigError
from gna.config.study import check_yaml_file, typed_overrides

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "workflow/configs/smoke.yaml"


def dry_run(tmp_path, *args):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path / "work"),
           "-n", "--cores", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "SLURM_CONF": "/dev/null"})


def test_nested_config_values_get_their_yaml_types():
    # what Snakemake makes of --config 'experiments={"hybrid_distillation": {"gpus_per_stage": 4, "nodes": 2}}'
    # k=[0,1] seed=3: nested scalars as strings (YAML's base loader), merged into the config files' values
    overrides = {"experiments": {"hybrid_distillation": {"gpus_per_stage": "4", "nodes": "2", "name": "x"}},
                 "k": ["0", "1.5", "true", "null", "a"], "seed": 3, "study": "007"}
    config = {"experiments": {"hybrid_distillation": {"gpus_per_stage": "4", "nodes": "2", "name": "x", "lr": 1e-3},
                              "kv_pairs": {"pairs": [2]}}, "k": ["0", "1.5", "true", "null", "a"], "seed": 3,
              "study": "007"}
    typed_overrides(config, overrides)
    assert config == {"experiments": {"hybrid_distillation": {"gpus_per_stage": 4, "nodes": 2, "name": "x", "lr": 1e-3},
                                      "kv_pairs": {"pairs": [2]}}, "k": [0, 1.5, True, None, "a"], "seed": 3,
                      "study": "007"}  # a top-level value keeps Snakemake's own parse


def test_a_yaml_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "study.yaml"
    bad.write_text("study: micro\nseed: [0\nmodels: {}\n")
    with pytest.raises(StudyConfigError, match=rf"config error: {bad} line 3, column \d+: not valid YAML"):
        check_yaml_file(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(StudyConfigError, match=f"config error: {empty} is empty"):
        check_yaml_file(empty)
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(StudyConfigError, match="the top level is a list, not a mapping"):
        check_yaml_file(tmp_path / "list.yaml")
    check_yaml_file(ROOT / "config.yaml")


def test_config_key_value_changes_one_key_of_the_default_study(tmp_path):
    out = dry_run(tmp_path, "--config", "seed=1",
                  'experiments={"hybrid_distillation": {"gpus_per_stage": 1, "nodes": 1}}')
    assert out.returncode == 0, out.stderr[-3000:]
    assert "extended by additional config" in out.stdout + out.stderr and "Job stats:" in out.stdout


def test_a_preset_replaces_config_yaml_and_config_changes_it(tmp_path):
    out = dry_run(tmp_path, "results/scan/llama-tiny.ranking.csv", "--configfile", str(SMOKE), "--config", "seed=2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "micro-llama" not in out.stdout  # nothing of config.yaml's study


@pytest.mark.parametrize("args,line", [
    (["--config", "seed=x"], "config error: seed: 'x' is not of type 'integer' (schema rule: type 'integer')"),
    (["--configfile", str(SMOKE), "--config", 'experiments={"hybrid_distillation": {"gpus_per_stage": 3}}'],
     "config error: hybrid_distillation: the effective batch of"),
])
def test_a_config_error_is_one_line_with_no_python_frames(tmp_path, args, line):
    out = dry_run(tmp_path, *args)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    errors = [x for x in text.splitlines() if x.startswith("config error")]
    assert len(errors) == 1 and errors[0].startswith(line), text[-2000:]
    assert 'File "' not in text and "Traceback" not in text, text[-2000:]
