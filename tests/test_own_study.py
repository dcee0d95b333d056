"""A study in a few lines: a file with ``extends: <preset>`` runs the preset's settings on the file's own
models and experiments only, writes its figures into a folder of its own, and is refused in one line
naming the file and the key where a key is wrong (gna.config.study, docs/own-model.md)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gna.config.schema import with_defaults
from gna.config.study import study_from_files
from gna.errors import StudyConfigError

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "workflow/configs/own-model.yaml"

MINE = """\
extends: smoke
models:
  mine: {random: {family: llama, hidden: 32, layers: 3, heads: 4}}
experiments:
  layer_pruning: {models: [mine], tolerance: 0.5}
  kv_pairs: {models: [mine], pairs: [2, 4]}
"""


def dry_run(tmp_path, *files):
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                           str(tmp_path), "--dry-run", "--forceall", "--nolock", "--configfile", *map(str, files)],
                          capture_output=True, text=True)


def test_a_preset_and_a_ten_line_file_build_only_the_files_model_and_experiments(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(MINE)
    assert len(MINE.splitlines()) <= 10
    out = dry_run(tmp_path, mine)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    rules = set(re.findall(r"^(?:local)?rule (\w+):", text, re.M))
    models = set(re.findall(r"\bmodel=([^,\s]+)", text))
    outputs = [p for line in re.findall(r"^\s+output: (.*)$", text, re.M) for p in line.split(", ")]
    assert models == {"mine"}, models                         # the smoke preset's three models: none
    assert {"head_scan", "kv_pairs", "findings"} <= rules
    assert not rules & {"topk_removal", "head_keeping", "ssm_masking", "hybrid_attention", "layer_swap",
                        "arc_chat", "distill_stage", "evaluate_hybrid"}, rules   # the preset's other experiments
    figures = [p for p in outputs if p.startswith("figures/")]
    assert figures and all(p.startswith("figures/mine/") for p in figures), figures   # never the micro study's


def test_a_bad_key_in_the_users_file_is_refused_in_one_line_naming_the_file_and_the_key(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text(MINE.replace("kv_pairs:", "kv_pairz:"))
    out = dry_run(tmp_path, bad)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"config error: {bad}: experiments.kv_pairz") and "kv_pairs" in lines[0]
    # a value the schema refuses, after merging: the file and the key too
    bad.write_text(MINE + "scan: {n_pairs: 0}\n")
    with pytest.raises(StudyConfigError, match=rf"^config error: {re.escape(str(bad))}: scan\.n_pairs: 0 is less"):
        from gna.config.study import check_study
        check_study(study_from_files([bad], ROOT), [bad])


def test_the_file_keeps_the_micro_studys_figures_and_the_presets_own_apart(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(MINE + "figures: figures\n")
    with pytest.raises(StudyConfigError, match=r"mine\.yaml: figures: 'figures' is the micro study's"):
        study_from_files([mine], ROOT)
    mine.write_text(MINE.replace("extends: smoke", "extends: paperr"))
    with pytest.raises(StudyConfigError, match=r"mine\.yaml: extends: 'paperr' is neither a preset \(micro, paper"):
        study_from_files([mine], ROOT)
    mine.write_text(MINE.split("experiments:")[0])
    with pytest.raises(StudyConfigError, match=r"mine\.yaml: no experiments"):
        study_from_files([mine], ROOT)
    assert study_from_files([ROOT / "workflow/configs/smoke.yaml"], ROOT) is None   # a preset alone: Snakemake's merge


def test_the_template_validates_and_holds_one_model_the_papers_experiments_and_its_own_figures():
    raw = yaml.safe_load(TEMPLATE.read_text())
    study = with_defaults(study_from_files([TEMPLATE], ROOT))
    paper = yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text())
    assert list(study["models"]) == ["my-model"] and study["scan"]["models"] == ["my-model"]
    assert set(study["experiments"]) == set(raw["experiments"]) <= set(paper["experiments"])
    assert study["figures"] == "figures/own-model" and study["study"] == "own-model"
    assert study["dtype"] == "bfloat16" and study["device"] == "cuda" and study["tasks"] == paper["tasks"]
    assert all(e["models"] == ["my-model"] for e in study["experiments"].values())
    assert len([line for line in TEMPLATE.read_text().splitlines() if not line.startswith("#")]) <= 10
