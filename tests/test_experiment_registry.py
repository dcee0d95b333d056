"""An experiment lives in one place: its rule file declares it (gna.experiments.registry), and the
shared parts of the workflow (rule all, the batches, the plan, the findings) loop over the
declarations. Checked two ways: the worked example of docs/adding-an-experiment.md, built in a
copy of the repository from the files the page shows, appears in the DAG, the plan and the
findings; and the order the rule files are included in changes no job. That each experiment's code is
in one place is tests/test_experiment_code.py's."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gna.experiments.registry import Estimator, Registry, Section
from gna.plan import Hardware, dag_jobs, gpu_rules, plan
from snakemake.utils import validate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs/examples/head_norms"


def tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def test_the_registry_refuses_a_second_declaration_and_a_rule_estimated_twice():
    reg = Registry()
    reg.declare("a", plan={"rule_a": Estimator("m:f")}, findings=[Section(2, "m:g"), Section(1, "m:h")])
    with pytest.raises(ValueError, match="declared twice"):
        reg.declare("a")
    with pytest.raises(ValueError, match="plan estimates from both 'a' and 'b'"):
        reg.declare("b", plan={"rule_a": Estimator("m:f")})
    assert [s["function"] for s in reg.sections()] == ["m:h", "m:g"]   # by Section order, not declaration


def dry_run_jobs(snakefile: Path, workdir: Path, env=None) -> list[str]:
    """Every job of the default study's dry run: its rule and outputs, sorted."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(snakefile), "--directory", str(workdir),
                          "-n", "--forceall", "--nolock"], cwd=workdir, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    # a job's block ends at a blank line, at the next job's timestamp line or rule line, or at the end
    blocks = re.findall(r"^(?:local)?rule (\w+):\n(.*?)(?=\n\n|\n\[|\n(?:local)?rule \w+:|\Z)", out.stdout + out.stderr,
                        re.M | re.S)
    return sorted(f"{rule} {re.search(r'output: (.*)', body).group(1) if 'output:' in body else ''}"
                  for rule, body in blocks)


def copy_of_repository(base: Path) -> Path:
    """The tracked files of the repository, copied under ``base``."""
    repo = base / "repo"
    for f in tracked_files():
        if (ROOT / f).is_file():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, repo / f)
    return repo


def test_the_order_of_the_rule_files_changes_no_job(tmp_path):
    """The Snakefile includes the step rule files sorted by name; in the reverse order, the same jobs."""
    repo = copy_of_repository(tmp_path)
    text = (repo / "Snakefile").read_text()
    anchor = '\ntry:\n    include: "workflow/rules/common.smk"\n'
    assert anchor in text and "STEP_RULE_FILES = sorted(" in text
    (repo / "Snakefile.reversed").write_text(text.replace(anchor, "\nSTEP_RULE_FILES.reverse()" + anchor, 1))
    work = tmp_path / "work"
    work.mkdir()
    assert dry_run_jobs(repo / "Snakefile.reversed", work) == dry_run_jobs(repo / "Snakefile", work)


@pytest.fixture(scope="module")
def example_repo(tmp_path_factory):
    """A copy of the repository with the page's example added: the rule file, the script, the
    library module and the schema entry; no other file changed."""
    repo = copy_of_repository(tmp_path_factory.mktemp("example"))
    shutil.copy2(EXAMPLE / "head_norms.smk", repo / "workflow/rules/head_norms.smk")
    shutil.copy2(EXAMPLE / "script.py", repo / "workflow/scripts/head_norms.py")
    shutil.copy2(EXAMPLE / "library.py", repo / "workflow/gna/experiments/head_norms.py")
    schema = repo / "workflow/schemas/config.schema.yaml"
    text = schema.read_text()
    anchor = "  experiments:\n    type: object\n    additionalProperties: false\n    default: {}   # none: the head ranking only\n    properties:\n"
    assert anchor in text
    schema.write_text(text.replace(anchor, anchor + (EXAMPLE / "schema.yaml").read_text(), 1))
    study = yaml.safe_load((repo / "config.yaml").read_text())
    study["experiments"].update(yaml.safe_load((EXAMPLE / "config.yaml").read_text())["experiments"])
    validate(study, str(schema))   # the copy's schema, with the example's entry: its defaults filled in
    return repo, study


def test_the_worked_example_appears_in_the_dag_the_plan_and_the_findings(example_repo, tmp_path, monkeypatch):
    repo, study = example_repo
    env = {"PYTHONPATH": str(repo / "workflow")}
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    jobs = dag_jobs(study, snakefile=repo / "Snakefile", workdir=repo)
    assert ("head_norms", {}) in jobs
    assert jobs.estimators["head_norms"] == {"function": "gna.plan.job_estimates:models_loaded", "options": {},
                                             "experiment": "head_norms"}
    rows = [r for r in plan(study, jobs, Hardware(), gpus=gpu_rules(repo / "workflow/rules")) if r.rule == "head_norms"]
    assert len(rows) == 1 and rows[0].gpu and rows[0].hours > 0
    section = [s for s in jobs.sections if s["function"] == "gna.experiments.head_norms:findings"]
    assert section == [{"order": 90, "function": "gna.experiments.head_norms:findings", "options": {"top": 5}}]
    # the library module, run as its script would, then the findings as the findings rule calls them
    rankings = pd.read_csv(repo / "figures/head_ranking.csv")
    paths = {}
    for model in study["experiments"]["head_norms"]["models"]:
        paths[model] = tmp_path / f"{model}.ranking.csv"
        rankings[rankings.model == model].to_csv(paths[model], index=False)
    specs = {m: {"path": str(repo / study["models"][m]["path"]), "dtype": "float32", "device": "cpu"} for m in paths}
    fig = tmp_path / "figures"
    code = ("import json, sys; from gna.experiments import head_norms; from gna.report import findings; "
            "a = json.loads(sys.argv[1]); head_norms.write_table(a['specs'], a['rankings'], a['fig'] + '/head_norms.csv'); "
            "findings.make(a['fig'], a['fig'] + '/findings.md', a['sections'])")
    args = {"specs": specs, "rankings": {m: str(p) for m, p in paths.items()}, "fig": str(fig), "sections": section}
    fig.mkdir()
    out = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_csv(fig / "head_norms.csv")
    assert set(table.model) == set(paths) and (table.norm > 0).all()
    findings_md = (fig / "findings.md").read_text()
    assert "## Extension: the scan's top-5 KV heads are among the 5 largest-norm heads" in findings_md
    for model in paths:
        assert re.search(rf"\*\*{model}\*\*: (holds|does not hold)\. \d of 5 shared among \d+ heads", findings_md)
