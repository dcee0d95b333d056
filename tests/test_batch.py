"""Several conditions per job at micro scale (batch_conditions, workflow/rules/batch.smk): the same
outputs, from fewer jobs; each condition's script sees exactly what its own job would."""
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

from gna.jobs.condition_batches import condition_object, named_inputs, run_conditions

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}


def summary(config: Path | None = None) -> dict[str, str]:
    """output file -> the rule that makes it, for the whole default study (a dry parse, no job runs)."""
    cmd = [sys.executable, "-m", "snakemake", "--forceall", "--summary", "--directory", str(ROOT)]
    out = subprocess.run(cmd + (["--configfile", str(config)] if config else []), cwd=ROOT, env=ENV,
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()[1:] if "\t" in line]
    return {r[0]: r[2] for r in rows}


def test_batched_study_makes_the_same_files_in_fewer_jobs(tmp_path):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert cfg["batch_conditions"] == 0   # the micro study batches
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump({**cfg, "batch_conditions": 1}))
    batched, single = summary(), summary(one)
    assert set(batched) == set(single)
    moved = {f: r for f, r in batched.items() if r != single[f]}
    assert {rule_of(single[f]) for f in moved} >= {"gradual_pruning", "individual_pruning", "topk_removal", "kv_pairs",
                                                   "distill_stage", "evaluate_hybrid", "head_scan", "head_pairs"}
    assert all(r.startswith("batch_") for r in moved.values())
    # one condition per job, but for the rules whose conditions share work: one job per model
    shared = {f: r for f, r in single.items() if r.startswith("batch_")}
    assert {rule_of(r) for r in shared.values()} == {"gradual_pruning", "individual_pruning", "topk_removal"}
    assert len({r for f, r in shared.items() if "/gradual/depth" in f}) == len(cfg["experiments"]["layer_pruning"]["models"])
    # one batch job per rule across models: gradual pruning of every model's depths in one
    assert len({batched[f] for f in batched if "/gradual/depth" in f}) == 1
    # a condition with several outputs moves whole: the scan's ranking and G&A table in one job
    assert batched["results/scan/micro-llama.ranking.csv"] == batched["results/scan/micro-llama.ga.csv"]
    # a stage reads the one before it: stages 2 and 3 (and the two state sizes) never share a batch
    stages = {f: r for f, r in batched.items() if "/stage" in f and single[f] == "distill_stage"}
    by_stage = {(f.split("-s")[1].split("-")[0], f[-1]): r for f, r in stages.items()}
    assert len(set(by_stage.values())) == len(by_stage) == 4
    assert all(batched[f] == by_stage[(f.split("-s")[1].split("-")[0], f[-1])] for f in stages)
    # a student's evaluation waits for the students of its own state size only
    evals = {f: r for f, r in batched.items() if single[f] == "evaluate_hybrid"}
    assert len(set(evals.values())) == 3   # the teacher; the state-16 students; the state-4 one


def rule_of(job: str) -> str:
    """The rule a job runs: ``batch_<rule>_<i>``'s rule, or the job's own."""
    return re.sub(r"^batch_(.*)_\d+$", r"\1", job)


def write_script(path: Path) -> str:
    path.write_text("from pathlib import Path\n"
                    "s = snakemake\n"
                    "Path(s.output[0]).write_text(f'{s.rule} {s.params.value} {s.wildcards.get(\"k\")} '\n"
                    "    f'{list(s.input.probes)} {s.input.model} {s.input[0]} {s.log[0]} {s.threads}')\n")
    return str(path)


def test_each_condition_runs_its_rules_script_with_its_own_job(tmp_path):
    script = write_script(tmp_path / "cond.py")
    jobs = [{"rule": "r", "wildcards": {"k": str(k)}, "params": {"value": 10 * k}, "script": script,
             "input": [("model", "m"), ("probes", [f"p{k}a", f"p{k}b"]), (None, "x")],
             "output": [str(tmp_path / f"k{k}.txt")], "log": [f"logs/k{k}.log"]} for k in (1, 2)]
    batch = SimpleNamespace(params=SimpleNamespace(jobs=jobs), threads=1, config={})
    run_conditions(batch)   # not a Snakemake script job: returns
    assert (tmp_path / "k1.txt").read_text() == "r 10 1 ['p1a', 'p1b'] m m logs/k1.log 1"
    assert (tmp_path / "k2.txt").read_text() == "r 20 2 ['p2a', 'p2b'] m m logs/k2.log 1"
    obj = condition_object(jobs[0], 2, {"seed": 0})
    assert list(obj.input) == ["m", "p1a", "p1b", "x"] and dict(obj.params) == {"value": 10}
    assert obj.config == {"seed": 0} and obj.wildcards.k == "1"


def test_a_condition_sees_its_named_outputs():
    """head_scan writes ``output.ranking`` and ``output.ga``: its script reads them by name."""
    obj = condition_object({"rule": "r", "wildcards": {}, "params": {}, "input": [], "log": [],
                            "output": ["a.ranking.csv", "a.ga.csv"], "output_names": {"ranking": 0, "ga": 1}}, 1, {})
    assert obj.output.ranking == "a.ranking.csv" and obj.output.ga == "a.ga.csv" and list(obj.output) == [
        "a.ranking.csv", "a.ga.csv"]


def test_a_name_given_to_a_list_of_inputs_keeps_the_whole_list():
    """ssm_masking's ``tasks=expand(...)``: Snakemake names the span (start, end); a condition's
    ``input.tasks`` must be that list, not its first file (whose characters a zip would walk)."""
    items = ["model/", "a.jsonl", "b.jsonl", "c.jsonl", "ga.csv", "loose"]
    names = {"model": (0, None), "tasks": (1, 4), "ga": (4, None)}
    got = named_inputs(items, names, lambda v: v)
    assert got == [("model", "model/"), ("tasks", ["a.jsonl", "b.jsonl", "c.jsonl"]), ("ga", "ga.csv"),
                   (None, "loose")]
    obj = condition_object({"rule": "r", "wildcards": {}, "params": {}, "input": got, "output": ["o"],
                            "log": []}, 1, {})
    assert list(obj.input.tasks) == ["a.jsonl", "b.jsonl", "c.jsonl"] and obj.input.ga == "ga.csv"


def test_a_batch_carries_its_conditions_scripts_by_content(tmp_path):
    from gna.jobs.condition_batches import script_digests

    a, b = write_script(tmp_path / "a.py"), tmp_path / "b.py"
    b.write_text("print('b')\n")
    jobs = [{"script": str(a)}, {"script": str(b)}, {"script": str(a)}]
    before = script_digests(jobs)
    assert list(before) == ["a.py", "b.py"] and all(len(v) == 64 for v in before.values())
    b.write_text("print('b, edited')\n")   # an edited condition script: the batch's params change
    after = script_digests(jobs)
    assert after["b.py"] != before["b.py"] and after["a.py"] == before["a.py"]
    assert "scripts=batches.script_digests(_jobs)" in (ROOT / "workflow" / "rules" / "batch.smk").read_text()
