"""Tables carry their precision, and a run's tables are checked against the committed ones: within
the stated tolerances, text and verdicts exactly, with a list of what differs."""
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from gna.report import common, tolerance

ROOT = Path(__file__).resolve().parents[1]


def test_tables_carry_four_significant_digits(tmp_path):
    df = pd.DataFrame({"model": ["a", "b"], "k": [0, 1], "mmlu": [57.99999999999999, 97.66666666666667],
                       "ppl": [79083.29878226838, 0.00034457438748098924], "draws": [None, 3.0]})
    common.write_table(df, tmp_path / "t.csv", tmp_path / "t.md")
    assert (tmp_path / "t.csv").read_text() == "model,k,mmlu,ppl,draws\na,0,58.0,79080.0,\nb,1,97.67,0.0003446,3.0\n"
    assert "57.99999999999999" not in (tmp_path / "t.md").read_text()   # the Markdown: its floatfmt


EXACT = {"inference_memory.csv", "inference_memory_measured.csv"}
"""Exact sizes, rounded by their tables (published precision; 4 decimals): write_table(digits=None)."""


def test_committed_tables_carry_no_float_noise():
    for p in (ROOT / "figures").glob("*.csv"):
        if p.name in EXACT:
            continue
        for tok in p.read_text().replace("\n", ",").split(","):
            digits = tok.lstrip("-").replace(".", "").strip("0")   # the significant ones
            assert not ("." in tok and digits.isdigit() and len(digits) > common.TABLE_DIGITS), (p.name, tok)


REF = "model,k,mmlu,lambada_ppl,kept\nm,0,91.0,1.807,L4H2\nm,1,90.5,5184.0,L4H2 L5H2\n"
FINDINGS = "# F\n\n## Fig. 2: a claim\n- **m**: holds. MMLU 0.91\n- **n**: partly. x (failed: y)\n"


def test_identical_and_last_digit_pass_beyond_tolerance_fails_and_says_what():
    assert tolerance.compare({"t.csv": REF}, {"t.csv": REF}) == []
    assert tolerance.compare({"t.csv": REF.replace("5184.0", "5185.0")}, {"t.csv": REF}) == []  # last digit
    diff = tolerance.compare({"t.csv": REF.replace("90.5", "91.5")}, {"t.csv": REF})
    assert len(diff) == 1 and "row 2" in diff[0] and "mmlu: 91.5 vs committed 90.5" in diff[0]
    assert "kept: L4H2 vs committed L4H2 L5H2" in tolerance.compare({"t.csv": REF.replace("L4H2 L5H2", "L4H2")},
                                                                   {"t.csv": REF})[0]
    assert "missing" in tolerance.compare({}, {"t.csv": REF})[0]
    assert "rows" in tolerance.compare({"t.csv": REF.rsplit("m,1", 1)[0]}, {"t.csv": REF})[0]


def test_provenance_columns_are_reported_not_counted_as_differences():
    # a fresh install resolves the newest transformers: only the versions and kernels differ
    ref = ("model,size,best_accuracy,probe_sha256,v_torch,v_transformers,fused_kernels\n"
           "m,1,0.305,c602ae,2.13.0+cpu,5.24.0,none\nm,2,0.175,c602ae,2.13.0+cpu,5.24.0,none\n")
    newer = ref.replace("5.24.0", "5.25.0")
    assert tolerance.compare({"head_pairs_minimal.csv": newer}, {"head_pairs_minimal.csv": ref}) == []
    changes = tolerance.provenance({"head_pairs_minimal.csv": newer}, {"head_pairs_minimal.csv": ref})
    assert changes == ["head_pairs_minimal: v_transformers 5.25.0 vs committed 5.24.0 in 2 of 2 rows"]
    text = tolerance.report([], 1, "HEAD", changes)
    assert "**Pass**" in text and "## Provenance (not results)" in text and changes[0] in text
    # a result beside a version change still fails, and its line names the result's column only
    moved = newer.replace("0.305", "0.405")
    diff = tolerance.compare({"head_pairs_minimal.csv": moved}, {"head_pairs_minimal.csv": ref})
    assert len(diff) == 1 and "best_accuracy: 0.405 vs committed 0.305" in diff[0]


def test_trained_tables_get_the_trained_tolerance():
    ref = "variant,k,knowledge_avg,heldout_ppl\nk3,3,94.67,1.713\n"
    moved = ref.replace("94.67", "94.17").replace("1.713", "1.69")   # as observed on another machine
    assert tolerance.compare({"hybrid_heads.csv": moved}, {"hybrid_heads.csv": ref}) == []
    assert len(tolerance.compare({"kv_pairs.csv": moved}, {"kv_pairs.csv": ref})) == 2   # shipped models: strict
    far = ref.replace("94.67", "85.0").replace("1.713", "2.0")
    assert len(tolerance.compare({"hybrid_heads.csv": far}, {"hybrid_heads.csv": ref})) == 2
    # the students retrained on AVX2 kernels (measured: docs/reproducibility.md) are within it
    ref = "variant,mmlu,gsm8k,lambada\nk3-s4-ranked,32.5,92.0,89.0\nk3-s16-ranked,23.5,89.5,87.5\n"
    avx2 = "variant,mmlu,gsm8k,lambada\nk3-s4-ranked,28.5,90.0,90.0\nk3-s16-ranked,27.5,86.0,85.5\n"
    assert tolerance.compare({"hybrid_state_size.csv": avx2}, {"hybrid_state_size.csv": ref}) == []


def test_verdicts_compared_exactly_evidence_not():
    assert tolerance.verdicts(FINDINGS) == {("Fig. 2: a claim", "m"): "holds", ("Fig. 2: a claim", "n"): "partly"}
    assert tolerance.compare({"findings.md": FINDINGS.replace("0.91", "0.92")}, {"findings.md": FINDINGS}) == []
    diff = tolerance.compare({"findings.md": FINDINGS.replace("holds", "does not hold")}, {"findings.md": FINDINGS})
    assert diff == ["findings.md: Fig. 2: a claim / m: does not hold vs committed holds"]
    assert "absent" in tolerance.compare({"findings.md": FINDINGS.split("- **n**")[0]}, {"findings.md": FINDINGS})[0]


def test_the_committed_figures_pass_against_themselves_and_report_says_so(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    committed = tolerance.committed_files(ROOT / "figures")
    assert "findings.md" in committed and len(committed) > 10
    assert len(tolerance.verdicts(committed["findings.md"])) > 10
    assert tolerance.compare(committed, committed) == []
    assert "**Pass**" in tolerance.report([], len(committed), "HEAD")
    with pytest.raises(RuntimeError, match="cannot read the committed"):
        tolerance.committed_files(ROOT / "figures", rev="no-such-revision")
