"""A run's tables and verdicts against reference ones (the committed ``figures/``): numbers within
stated tolerances, text and verdicts exactly, and a list of what differs.

Why tolerances and not bytes. On one machine the study is deterministic: same seed, one torch
thread per job, so a rerun gives the same bytes. On another machine (another CPU, another BLAS
kernel) sums are taken in another order: a number computed from the shipped models moves in its
7th-8th significant digit, under the tables' precision (``common.TABLE_DIGITS``) except where it
rounds across a boundary; a model *trained in the run* (the aligned SSM of the layer swap, the
hybrid students) amplifies those last-digit differences over its steps into other weights, and its
scores move by a few prompts. So: tables of the shipped models agree to one unit in their last
digit; tables of trained models within a few points; verdicts (``findings.md``) exactly.
"""
from __future__ import annotations

import io
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= abs + rel * max(|a|, |b|)``."""

    abs: float = 0.0
    rel: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        return abs(a - b) <= self.abs + self.rel * max(abs(a), abs(b))

    def __str__(self) -> str:
        return " + ".join([f"{self.abs:g}"] * bool(self.abs) + [f"{self.rel:g} relative"] * bool(self.rel))


EVALUATED = Tolerance(rel=1e-3)
"""Tables of the shipped models: one unit in the 4th significant digit (the tables' precision)."""
TRAINED_TABLES = ("layer_swap", "hybrid_heads", "hybrid_state_size")
"""Tables of models trained in the run (align_student, distill_stage): machine-sensitive training."""
TRAINED_ACCURACY = Tolerance(abs=8.0)
"""Percent columns of trained models: 8 points (16 prompts of 200). Measured: the hybrid students
retrained under AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``) on the AVX-512 machine that made
``figures/`` moved by up to 4.0 points (MMLU), and on another user's machine by up to 6.0; two
students that differ only in their training noise are two draws, and at the students' MMLU (~30%)
one binomial standard error of a 200-prompt difference is sqrt(2 * 0.3 * 0.7 / 200) = 4.6 points.
The transformers release is not the cause: 5.20.0, 5.24.0 and 5.25.0 train bit-identical students
on one machine. The verdicts, compared exactly, are the check that matters."""
TRAINED_PPL = Tolerance(rel=0.10)
"""Perplexity columns (``*ppl*``) of trained models: 10% (observed on another machine: 1.2%)."""
PROVENANCE = re.compile(r"^(v_.+|fused_kernels|.+_sha256)$")
"""Columns that say how a row was computed (library versions: ``gna.jobs.script_job.provenance``; the
fused kernels that ran; input hashes), not what it measured: a fresh install resolves the newest releases,
so these differ from the committed ones without any result differing. Reported, never counted."""
VERDICT = re.compile(r"^- \*\*(?P<model>.+?)\*\*: (?P<verdict>holds|does not hold|partly|not resolved|n/a)(?P<note> \(underpowered[^)]*\))?\.", re.M)


def tolerance_of(table: str, column: str) -> Tolerance:
    if table not in TRAINED_TABLES:
        return EVALUATED
    return TRAINED_PPL if "ppl" in column else TRAINED_ACCURACY


def verdicts(findings_md: str) -> dict[tuple[str, str], str]:
    """(claim, model) -> verdict, from the text of a ``findings.md``."""
    out, claim = {}, ""
    for line in findings_md.splitlines():
        if line.startswith("## "):
            claim = line[3:].strip()
        elif m := VERDICT.match(line):
            out[(claim, m["model"])] = m["verdict"]
    return out


def _tables(run_csv: str, ref_csv: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return tuple(pd.read_csv(io.StringIO(t), keep_default_na=False, na_values=[""]) for t in (run_csv, ref_csv))


def compare_table(name: str, run_csv: str, ref_csv: str) -> list[str]:
    """What differs between two versions of the table ``name`` (csv texts), beyond tolerance; the
    provenance columns (:data:`PROVENANCE`) are not results and are left to :func:`provenance_table`."""
    run, ref = _tables(run_csv, ref_csv)
    if list(run.columns) != list(ref.columns):
        return [f"{name}: columns {list(run.columns)} vs committed {list(ref.columns)}"]
    if len(run) != len(ref):
        return [f"{name}: {len(run)} rows vs committed {len(ref)}"]
    out = []
    for c in (c for c in ref.columns if not PROVENANCE.match(c)):
        numeric = pd.api.types.is_numeric_dtype(run[c]) and pd.api.types.is_numeric_dtype(ref[c])
        tol = tolerance_of(name, c)
        for i, (a, b) in enumerate(zip(run[c], ref[c])):
            if pd.isna(a) and pd.isna(b):
                continue
            same = (numeric and not (pd.isna(a) or pd.isna(b)) and tol.allows(float(a), float(b))) or a == b
            if not same:
                out.append(f"{name}: row {i + 1} ({', '.join(str(v) for v in ref.iloc[i, :2])}) {c}: {a} vs "
                           f"committed {b}" + (f" (tolerance {tol})" if numeric else ""))
    return out


def provenance_table(name: str, run_csv: str, ref_csv: str) -> list[str]:
    """How the provenance columns of table ``name`` differ from the committed ones, a line per column
    and value pair ("v_transformers 5.25.0 vs committed 5.24.0 in 4 of 4 rows"); tables whose columns or
    rows differ are :func:`compare_table`'s."""
    run, ref = _tables(run_csv, ref_csv)
    if list(run.columns) != list(ref.columns) or len(run) != len(ref):
        return []
    out = []
    for c in (c for c in ref.columns if PROVENANCE.match(c)):
        pairs = pd.Series(list(zip(run[c].astype(str), ref[c].astype(str))))
        for (a, b), count in pairs[[a != b for a, b in pairs]].value_counts(sort=False).items():
            out.append(f"{name}: {c} {a} vs committed {b} in {count} of {len(ref)} rows")
    return out


def provenance(run: dict[str, str], ref: dict[str, str]) -> list[str]:
    """Every table's provenance changes (:func:`provenance_table`), for the report, not the verdict."""
    return [line for name in sorted(ref) if name.endswith(".csv") and name in run
            for line in provenance_table(name[:-4], run[name], ref[name])]


def part_verdicts(verdicts_csv: str) -> dict[tuple[str, str, str], str]:
    """(claim, model, part) -> verdict, from the text of a ``verdicts.csv`` (one row per tested part)."""
    t = pd.read_csv(io.StringIO(verdicts_csv), keep_default_na=False, na_values=[""])
    return {(str(r.claim), str(r.model), str(r.part)): str(r.verdict) for r in t.itertuples()}


def compare_verdicts(run_csv: str, ref_csv: str) -> list[str]:
    """What differs between two ``verdicts.csv``: each part's verdict, exactly (its numbers are the
    source tables', compared there within their tolerances)."""
    mine, theirs = part_verdicts(run_csv), part_verdicts(ref_csv)
    return [f"verdicts.csv: {' / '.join(key)}: {mine.get(key, 'absent')} vs committed {theirs.get(key, 'absent')}"
            for key in sorted(set(mine) | set(theirs)) if mine.get(key) != theirs.get(key)]


def compare(run: dict[str, str], ref: dict[str, str]) -> list[str]:
    """What differs between a run's files and the reference ones ({file name: text}): every reference
    ``*.csv`` within tolerance, the parts' verdicts of ``verdicts.csv`` and ``findings.md``'s claim
    verdicts exactly. Empty: the run reproduces them."""
    out = []
    for name in sorted(ref):
        if name.endswith(".csv") or name == "findings.md":
            if name not in run:
                out.append(f"{name}: missing from the run")
            elif name == "verdicts.csv":
                out += compare_verdicts(run[name], ref[name])
            elif name.endswith(".csv"):
                out += compare_table(name[:-4], run[name], ref[name])
    if "findings.md" in ref and "findings.md" in run:
        mine, theirs = verdicts(run["findings.md"]), verdicts(ref["findings.md"])
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                out.append(f"findings.md: {key[0]} / {key[1]}: {mine.get(key, 'absent')} vs committed "
                           f"{theirs.get(key, 'absent')}")
    return out


def folder_files(folder) -> dict[str, str]:
    """{file name: text} of a folder's tables and findings."""
    return {p.name: p.read_text() for p in sorted(Path(folder).iterdir())
            if p.suffix == ".csv" or p.name == "findings.md"}


def committed_files(folder, rev: str = "HEAD") -> dict[str, str]:
    """{file name: text} of ``folder``'s tables and findings as committed at ``rev`` (git)."""
    folder = Path(folder)

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            raise RuntimeError(f"cannot read the committed {folder} at {rev!r} with git: "
                               f"{getattr(e, 'stderr', '') or e}".strip()) from None
    names = [n for n in git("ls-tree", "--name-only", rev, "./").split()
             if n.endswith(".csv") or n == "findings.md"]
    return {n: git("show", f"{rev}:./{n}") for n in names}


def report(differences: list[str], n_files: int, rev: str, provenance_changes: list[str] = ()) -> str:
    """A Markdown report of a check: what it compared, with which tolerances, what differs, and (not
    counted) how the run's provenance differs from the committed one."""
    head = (f"# Tables and verdicts against the committed ones ({rev})\n\n"
            f"{n_files} files compared. Tolerances: tables of the shipped models {EVALUATED} "
            f"(their precision); tables of trained models ({', '.join(TRAINED_TABLES)}) {TRAINED_ACCURACY} "
            f"points, perplexities {TRAINED_PPL}; text columns and verdicts exactly; provenance columns "
            f"(library versions, kernels, input hashes) reported, not compared (gna.report.tolerance).\n\n")
    if not differences:
        body = "**Pass**: every number within tolerance, every verdict the same.\n"
    else:
        body = f"**Fail**: {len(differences)} differences.\n\n" + "".join(f"- {d}\n" for d in differences)
    if provenance_changes:
        body += ("\n## Provenance (not results)\n\nThis run was computed with other versions or inputs than "
                 "the committed tables:\n\n" + "".join(f"- {d}\n" for d in provenance_changes))
    return head + body
