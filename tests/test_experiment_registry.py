"""An experiment lives in one place: its rule file declares it (gna.experiments.registry), and the
shared parts of the workflow (rule all, the batches, the plan, the findings) loop over the
declarations. Checked two ways: the worked example of docs/adding-an-experiment.md (ablate a head only
at the answer position), built in a copy of the repository from the files the page shows, appears in
the DAG and the plan, passes the copy's own checks and scores the shipped micro transformer as the
page says; and the order the rule files are included in changes no job. That each experiment's code is
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
EXAMPLE = ROOT / "docs/examples/answer_position"


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


def insert(path: Path, anchor: str, text: str, before: bool = False) -> None:
    """``text`` put after (or before) the one ``anchor`` of the file at ``path``."""
    old = path.read_text()
    assert old.count(anchor) == 1, (path, anchor)
    path.write_text(old.replace(anchor, text + anchor if before else anchor + text))


@pytest.fixture(scope="module")
def example_repo(tmp_path_factory):
    """A copy of the repository with the page's example added: the rule file, the script and the
    library module; the schema entry, the vocabulary's table entry and the study's config line (and the
    vocabulary test's example of the new kind). No other file changed."""
    repo = copy_of_repository(tmp_path_factory.mktemp("example"))
    shutil.copy2(EXAMPLE / "answer_position.smk", repo / "workflow/rules/answer_position.smk")
    shutil.copy2(EXAMPLE / "script.py", repo / "workflow/scripts/answer_position.py")
    shutil.copy2(EXAMPLE / "library.py", repo / "workflow/gna/experiments/answer_position.py")
    vocabulary = repo / "workflow/gna/interventions/vocabulary.py"
    insert(vocabulary, "from .rows import mask_last_row\n", (EXAMPLE / "vocabulary_import.py").read_text())
    insert(vocabulary, "\nINTERVENTIONS = tuple(KINDS)", (EXAMPLE / "vocabulary_entry.py").read_text(), before=True)
    insert(repo / "tests/test_intervention_vocabulary.py", '    "mask_last_row": [',
           (EXAMPLE / "vocabulary_example.py").read_text(), before=True)
    schema = repo / "workflow/schemas/config.schema.yaml"
    insert(schema, "  experiments:\n    type: object\n    additionalProperties: false\n"
                   "    default: {}   # none: the head ranking only\n    properties:\n", (EXAMPLE / "schema.yaml").read_text())
    study = yaml.safe_load((repo / "config.yaml").read_text())
    study["experiments"].update(yaml.safe_load((EXAMPLE / "config.yaml").read_text())["experiments"])
    validate(study, str(schema))   # the copy's schema, with the example's entry: its defaults filled in
    return repo, study


def in_copy(repo: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python *args`` run in the copy, its library first on the path."""
    return subprocess.run([sys.executable, *args], cwd=repo, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(repo / "workflow")})


ABLATED = ["nowhere", "everywhere", "answer"]


def test_the_worked_example_appears_in_the_dag_and_the_plan(example_repo, monkeypatch):
    repo, study = example_repo
    monkeypatch.setenv("PYTHONPATH", str(repo / "workflow"))
    jobs = dag_jobs(study, snakefile=repo / "Snakefile", workdir=repo)
    models = study["experiments"]["answer_position"]["models"]
    assert sorted(tuple(sorted(wc.items())) for rule, wc in jobs if rule == "answer_position") == sorted(
        (("ablated", a), ("model", m)) for m in models for a in ABLATED)
    assert jobs.estimators["answer_position"] == {"function": "gna.plan.job_estimates:probe_pairs", "options": {},
                                                  "experiment": "answer_position"}
    rows = [r for r in plan(study, jobs, Hardware(), gpus=gpu_rules(repo / "workflow/rules"))
            if r.rule == "answer_position"]
    assert len(rows) == len(models) * len(ABLATED) and all(r.gpu and r.hours > 0 for r in rows)
    assert not any("answer_position" in s["function"] for s in jobs.sections)   # it judges no claim


def test_the_copy_passes_the_checks_of_its_vocabulary_imports_and_layout(example_repo):
    """The new kind applies as the vocabulary test asks of every kind; the vocabulary reaches the
    experiment's module with no import circle and the parse stays torch-free; no module too long."""
    repo, _ = example_repo
    out = in_copy(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_intervention_vocabulary.py",
                  "tests/test_import_graph.py::test_no_import_cycle_among_gna_modules_lazy_imports_included",
                  "tests/test_import_graph.py::test_the_snakefile_imports_distillation_only_from_its_torch_free_part",
                  "tests/test_layout.py")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


# On the shipped micro transformer (six layers, L3H3 its Gather head): every other prompt loses a
# dictionary line, so a batch's rows have two lengths and the shorter ones are padded on the right.
# A head of the last layer ablated at the answer position alone scores exactly as ablated everywhere
# (its other positions reach no answer); the Gather head, two layers below the last, does not; each
# prompt scored alone agrees with its row of a padded batch; leaving the contexts restores the model.
PROPERTIES = """
import json, sys, torch
from gna.interventions import applied, label
from gna.models import load_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, score

model, tok = load_model({"path": "data/models/micro-llama", "dtype": "float32", "device": "cpu"})
examples = generate_kv_probe(n_pairs=8, n_examples=32, seed=1, fmt="compact")
for ex in examples[::2]:
    lines = ex["prompt"].split("\\n")
    del lines[1 if ex["answer"] == 0 else 0]   # a line other than the answer's
    ex["prompt"] = "\\n".join(lines)
probe = encode(examples, tok)

def logprobs(specs, batch_size=16):
    with applied(model, specs):
        return score(model, probe, batch_size=batch_size).logprobs

base, out = logprobs([]), {"lengths": sorted({len(p) for p in probe.prompt_ids}), "heads": {}}
for head in ([5, 0], [3, 3]):
    every, answer = logprobs([{"ablate_heads": [head]}]), logprobs([{"ablate_at_answer": [head]}])
    out["heads"][label([{"ablate_at_answer": [head]}])] = {
        "as_everywhere": torch.equal(answer, every), "changes": not torch.equal(answer, base)}
# unpadded, one prompt a batch: the rows of the Gather head's padded batches, each where it belongs
out["row_alone"] = torch.allclose(logprobs([{"ablate_at_answer": [[3, 3]]}], batch_size=1), answer, atol=1e-5)
out["restored"] = torch.equal(logprobs([]), base)
print(json.dumps(out))
"""


def test_ablating_at_the_answer_position_alone_on_the_micro_transformer(example_repo):
    repo, _ = example_repo
    out = in_copy(repo, "-c", PROPERTIES)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(got["lengths"]) == 2 and got["row_alone"] and got["restored"]
    last, gather = got["heads"]["ablate_at_answer=L5H0"], got["heads"]["ablate_at_answer=L3H3"]
    assert last == {"as_everywhere": True, "changes": True}
    assert gather == {"as_everywhere": False, "changes": True}


def test_the_script_writes_the_rows_the_page_promises(example_repo, tmp_path):
    """The rule's script on micro-llama, its three conditions, as the rule calls it (params as it
    sets them) on two small probe sets; the ranking the shipped figure holds."""
    repo, study = example_repo
    ranking = pd.read_csv(repo / "figures/head_ranking.csv")
    ranking[ranking.model == "micro-llama"].to_csv(tmp_path / "ranking.csv", index=False)
    probes = [[8, 1], [16, 1]]
    code = (
        "import json, runpy, sys; from pathlib import Path; from gna.probes.kv import generate_kv_probe, write_jsonl\n"
        "a = json.loads(sys.argv[1])\n"
        "class Named(dict):\n    __getattr__ = dict.__getitem__\n"
        "class Files(list):\n"
        "    def __init__(self, named):\n        super().__init__(named.values()); self.__dict__.update(named)\n"
        "paths = [write_jsonl(generate_kv_probe(n_pairs=n, n_examples=32, seed=s, fmt='compact'),\n"
        "                     Path(a['dir']) / f'kv-n{n}-s{s}.jsonl') for n, s in a['probes']]\n"
        "for ablated in a['ablated']:\n"
        "    smk = type('Snakemake', (), {})()\n"
        "    smk.rule, smk.log, smk.threads, smk.config = 'answer_position', [a['dir'] + f'/{ablated}.log'], 1, {}\n"
        "    smk.input = Files({'model': 'data/models/micro-llama', 'ranking': a['ranking'], 'probes': [str(p) for p in paths]})\n"
        "    smk.output, smk.wildcards = Files({'rows': a['dir'] + f'/{ablated}.csv'}), Named(model='micro-llama', ablated=ablated)\n"
        "    smk.params = Named(spec={'path': 'data/models/micro-llama', 'dtype': 'float32', 'device': 'cpu'},\n"
        "                       probes=a['probes'], top=1, batch_size=32, fields={'model': 'micro-llama',\n"
        "                       'experiment': 'answer_position', 'ablated': ablated, 'seed': 0})\n"
        "    runpy.run_path('workflow/scripts/answer_position.py', init_globals={'snakemake': smk})\n")
    args = {"dir": str(tmp_path), "ranking": str(tmp_path / "ranking.csv"), "probes": probes, "ablated": ABLATED}
    out = in_copy(repo, "-c", code, json.dumps(args))
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.concat([pd.read_csv(tmp_path / f"{a}.csv") for a in ABLATED], ignore_index=True)
    assert list(table.columns) == ["model", "experiment", "ablated", "seed", "heads", "task", "n_pairs", "probe_seed",
                                   "accuracy", "n"]
    assert sorted(zip(table.ablated, table.task)) == sorted((a, f"kv_n{n}_s{s}") for a in ABLATED for n, s in probes)
    assert set(table.heads) == {"L3H3"} and (table.n == 32).all()
    accuracy = table.set_index(["ablated", "n_pairs"]).accuracy
    assert accuracy["nowhere", 8] > 0.9 and accuracy["everywhere", 8] < 0.6   # the Gather head, removed
