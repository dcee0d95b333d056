"""Figures a reader does not stumble on: whole-number ticks on whole-number axes,
head labels explained, colour bars and query/key labels on the G&A heatmaps, and one "Missing
metadata" line (not one per output) from ``snakemake --report`` before a run."""
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from gna.report import head_scan, heatmaps, heads, pruning
from gna.report.missing_metadata import quiet_missing_metadata

ROOT = Path(__file__).resolve().parents[1]


def whole(ticks) -> bool:
    return all(float(t).is_integer() for t in ticks)


def texts(fig) -> str:
    return " ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def test_kv_pairs_and_layers_kept_have_whole_number_ticks():
    kv = pd.DataFrame([dict(model="m", condition=c, head=h, n_pairs=n, accuracy=0.5, accuracy_min=0.4, accuracy_max=0.6)
                       for c, h in (("full", "none"), ("no_gather", "L1H0")) for n in (2, 4, 8, 12, 16)])
    fig = heads.kv_pairs_figure(kv)
    assert list(fig.axes[0].get_xticks()) == [2, 4, 8, 12, 16]
    assert "L3H2 = layer 3, head 2" in texts(fig)
    gradual = pd.DataFrame([dict(depth=d, task=t, metric="acc", value=0.5) for d in (1, 2, 3) for t in ("mm", "kn")])
    fig = pruning.gradual_figure({"m": gradual}, {"m": 2}, ["mm"], ["kn"])
    assert whole(fig.axes[0].get_xticks())


def test_head_ranking_labels_are_explained():
    ga = pd.DataFrame([dict(model="m", rank=i + 1, layer=1, head=i, kind=k, drop=0.1, role="-", baseline_accuracy=0.9)
                       for i, k in enumerate(("attention", "mamba2"))])
    fig = head_scan.draw({"m": ga})
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["L1A0", "L1M1"]
    assert "L3A2 = attention head 2 and L3M2 = SSM (Mamba) head 2" in texts(fig)


def test_heatmaps_have_a_colour_bar_and_query_key_labels():
    mat = torch.tril(torch.ones(3, 3)) / torch.arange(1, 4)[:, None]
    fig = heatmaps.figure({"m": {"gather": ((1, 2, "attention"), mat), "aggregate": (None, None)}}, {"m": list("abc")})
    image_ax = fig.axes[0]
    assert image_ax.get_xlabel().startswith("key") and image_ax.get_ylabel().startswith("query")
    assert any(ax.get_ylabel() == "attention weight" for ax in fig.axes[1:])  # the colour bar
    assert "layer 1 head 2" in image_ax.get_title()


def test_missing_metadata_warnings_come_once(caplog):
    logger = logging.getLogger("gna-test-report")
    quiet_missing_metadata(logger.name)
    with caplog.at_level(logging.WARNING, logger.name):
        for f in ("results/a.csv", "results/b.csv", "results/c.csv"):
            logger.warning("Missing metadata for file %s. Maybe metadata was deleted or ... warning.", f)
        logger.warning("something else")
    assert [r.getMessage()[:40] for r in caplog.records] == ["No run records for results/a.csv and the", "something else"]


def test_the_report_before_a_run_prints_one_missing_metadata_line(tmp_path):
    """A fresh checkout: the committed figures/, no results/, no run records."""
    shutil.copytree(ROOT / "figures", tmp_path / "w/figures")
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path / "w"), "--report", str(tmp_path / "report.html"), "--cores", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "SLURM_CONF": "/dev/null"})
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-2000:]
    assert "Missing metadata" not in text and text.count("No run records for ") == 1
    assert (tmp_path / "report.html").stat().st_size > 100_000
