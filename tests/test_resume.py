"""A head scan or an evaluation killed mid-way resumes from what it finished, to outputs
byte-identical to an uninterrupted run's; another setting never resumes stale work; the partial
state is gone once the job succeeds (gna.resume, through the job context every script opens)."""
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from gna.probes.kv import generate_kv_probe, write_jsonl
from gna.resume.store import Section

PUT = Section.put  # the real one, under every stand-in below

KEYS = [f"k{i}" for i in range(20)]

# One job as a Snakemake script runs it: gna.jobs.script_job.job around the library call, with a
# stand-in for Snakemake's object (rule, input, output, params).
JOB = textwrap.dedent("""
    import sys
    from types import SimpleNamespace
    from gna.jobs.script_job import job
    from gna.io import write_csv
    from gna.models import load_model
    from gna.probes.kv import lm_eval_task_config, read_jsonl
    from gna.probes.scoring import encode

    what, model_dir, probe, out, batch_size, cache = sys.argv[1:]
    snakemake = SimpleNamespace(rule=f"resume_{what}", input=[model_dir, probe], output=[out], log=[], threads=1,
                                params={"batch_size": int(batch_size)}, wildcards={})
    with job(snakemake) as log:
        model, tok = load_model({"path": model_dir})
        if what == "scan":
            from gna.scan import scan
            ranking, _ = scan(model, encode(read_jsonl(probe), tok), batch_size=int(batch_size), max_rows=8,
                              progress=False)
            write_csv(ranking, out)
        else:
            from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate, tidy
            mc = lm_eval_task_config(probe, "kv_mc")
            plain = {k: v for k, v in mc.items() if k != "doc_to_choice"}
            ll = dict(plain, task="kv_ll", output_type="loglikelihood", doc_to_target="{{choices[answer]}}",
                      metric_list=[{"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
                                   {"metric": "acc", "aggregation": "mean", "higher_is_better": True}])
            gen = dict(plain, task="kv_gen", output_type="generate_until", doc_to_target="{{choices[answer]}}",
                       generation_kwargs={"until": ["Memorize"], "max_gen_toks": 2, "do_sample": False},
                       metric_list=[{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}])
            for cfg in (mc, ll, gen):
                cfg["dataset_kwargs"] = dict(cfg["dataset_kwargs"], cache_dir=cache)
            suite = TaskSuite(extra={c["task"]: c for c in (mc, ll, gen)})
            scores = evaluate(model, tok, ["kv_mc", "kv_ll", "kv_gen"], suite, batch_size=int(batch_size),
                              max_length=256, interventions=[{"ablate_heads": [[0, 1]]}])
            write_csv(tidy(scores, model="tiny"), out)
""")


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_model_dir):
    d = tmp_path_factory.mktemp("resume")
    (d / "job.py").write_text(JOB)
    probe = write_jsonl(generate_kv_probe(n_pairs=4, n_examples=12, seed=5, fmt="compact", key_pool=KEYS),
                        d / "probe.jsonl")
    return d, tiny_model_dir("llama"), probe


def run_job(setup, what: str, out: Path, batch_size: int = 3, stop_after: int | None = None):
    d, model_dir, probe = setup
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "workflow"), HF_HOME=str(d / "hf"),
               OMP_NUM_THREADS="1")
    env.pop("GNA_PARTIAL_STOP_AFTER", None)
    if stop_after is not None:
        env["GNA_PARTIAL_STOP_AFTER"] = str(stop_after)
    return subprocess.run([sys.executable, str(d / "job.py"), what, model_dir, str(probe), str(out), str(batch_size),
                           str(d / "datasets")], env=env, capture_output=True, text=True, timeout=600)


def units(out: Path) -> int:
    db = out.parent / ".partial" / out.name / "state.sqlite"
    return sqlite3.connect(db).execute("SELECT count(*) FROM units").fetchone()[0]


def check_resumes(setup, what: str, tmp_path: Path, stop: int):
    whole = tmp_path / "whole" / f"{what}.csv"
    done = run_job(setup, what, whole)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (whole.parent / ".partial").exists()  # removed on success

    out = tmp_path / "stopped" / f"{what}.csv"
    killed = run_job(setup, what, out, stop_after=stop)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not out.exists() and units(out) == stop  # every finished unit kept, nothing more
    resumed = run_job(setup, what, out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming: {stop} finished units" in resumed.stderr
    assert out.read_bytes() == whole.read_bytes()
    assert not (out.parent / ".partial").exists()

    # another setting: the stopped state of batch size 3 is replaced, never resumed from
    killed = run_job(setup, what, out, stop_after=stop)
    assert killed.returncode == -signal.SIGKILL and units(out) == stop
    other = run_job(setup, what, out, batch_size=2, stop_after=1)
    assert other.returncode == -signal.SIGKILL
    assert "resuming" not in other.stderr and units(out) == 1
    return out


@pytest.mark.slow
def test_a_killed_head_scan_resumes_to_the_same_bytes(setup, tmp_path):
    check_resumes(setup, "scan", tmp_path, stop=5)


@pytest.mark.slow
def test_a_killed_evaluation_resumes_to_the_same_bytes(setup, tmp_path):
    out = check_resumes(setup, "eval", tmp_path, stop=4)
    rows = out.read_text() if out.exists() else (tmp_path / "whole" / "eval.csv").read_text()
    assert "kv_gen" in rows and "perplexity" in rows  # generations and log-likelihoods both kept


# -- the same in one process: a stop raised after N units (fast) ----------------------------------

class Stop(Exception):
    pass


def stopping_after(monkeypatch, n: int | None):
    """Section.put stores its unit, then raises :class:`Stop` once ``n`` units were stored; returns
    the list of keys stored."""
    put, stored = PUT, []

    def counting(self, key, value, **kwargs):
        put(self, key, value, **kwargs)
        stored.append(key)
        if n is not None and len(stored) >= n:
            raise Stop

    monkeypatch.setattr(Section, "put", counting)
    return stored


def test_a_stopped_scan_resumes_in_process_and_runs_only_what_was_left(tiny_model, word_tokenizer, tmp_path,
                                                                          monkeypatch):
    from gna.probes.scoring import encode
    from gna.resume.store import resuming
    from gna.scan import scan

    model, _ = tiny_model("llama")
    encoded = encode(generate_kv_probe(n_pairs=4, n_examples=10, seed=2, fmt="compact", key_pool=KEYS),
                     word_tokenizer)
    whole = scan(model, encoded, batch_size=3, max_rows=8, progress=False)[0].to_csv()
    state = tmp_path / ".partial" / "ranking.csv"
    stored = stopping_after(monkeypatch, 3)
    with pytest.raises(Stop), resuming(state, "job-1"):
        scan(model, encoded, batch_size=3, max_rows=8, progress=False)
    assert (state / "state.sqlite").is_file()
    stored = stopping_after(monkeypatch, None)
    with resuming(state, "job-1"):
        resumed = scan(model, encoded, batch_size=3, max_rows=8, progress=False)[0].to_csv()
    assert resumed == whole
    total = len(stored) + 3
    assert total > 3 and not state.exists() and not state.parent.exists()  # removed on success

    stopping_after(monkeypatch, 3)
    with pytest.raises(Stop), resuming(state, "job-1"):
        scan(model, encoded, batch_size=3, max_rows=8, progress=False)
    stored = stopping_after(monkeypatch, None)
    with resuming(state, "job-2"):  # another key: nothing of job-1 is read
        scan(model, encoded, batch_size=3, max_rows=8, progress=False)
    assert len(stored) == total


def stopped_then_resumed(monkeypatch, run, stop: int):
    """``run()`` outside any job, then ``run("job-1")`` stopped after ``stop`` units and run again:
    (uninterrupted result, resumed result, the keys the resumed run stored)."""
    whole = run()
    stopping_after(monkeypatch, stop)
    with pytest.raises(Stop):
        run("job-1")
    stored = stopping_after(monkeypatch, None)
    return whole, run("job-1"), stored


def kv_task(tmp_path, monkeypatch) -> dict:
    """An lm-eval multiple-choice task over 10 compact KV prompts of 4 pairs, its caches in ``tmp_path``."""
    from gna.probes.kv import lm_eval_task_config

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    probe = write_jsonl(generate_kv_probe(n_pairs=4, n_examples=10, seed=2, fmt="compact", key_pool=KEYS),
                        tmp_path / "probe.jsonl")
    cfg = lm_eval_task_config(probe, "kv_mc")
    cfg["dataset_kwargs"]["cache_dir"] = str(tmp_path / "datasets")
    return cfg


@pytest.mark.parametrize("family,shared_prefix", [("llama", False), ("llama", True), ("mamba2", False)])
def test_a_stopped_evaluation_resumes_in_process(tiny_model, word_tokenizer, tmp_path, monkeypatch, family,
                                                 shared_prefix):
    """... to the bits of an evaluation outside any job (lm-eval's batches, unchanged), for attention
    and SSM models alike."""
    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate, tidy
    from gna.resume.store import resuming

    cfg = kv_task(tmp_path, monkeypatch)
    ll = {k: v for k, v in cfg.items() if k != "doc_to_choice"}
    ll.update(task="kv_ll", output_type="loglikelihood", doc_to_target="{{choices[answer]}}",
              metric_list=[{"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False}])
    suite = TaskSuite(extra={"kv_mc": cfg, "kv_ll": ll})
    model, _ = tiny_model(family)

    def run(key=None):
        if key is None:
            return tidy(evaluate(model, word_tokenizer, ["kv_mc", "kv_ll"], suite, batch_size=3, max_length=256,
                                 shared_prefix=shared_prefix)).to_csv()
        with resuming(tmp_path / ".partial" / "scores.csv", key):
            return run()

    whole, resumed, stored = stopped_then_resumed(monkeypatch, run, stop=2)
    assert resumed == whole
    assert len(stored) == 2  # 10 contexts in units of 3: 4 units, 2 of them kept from the stopped run
    assert "perplexity" in whole
    assert not (tmp_path / ".partial").exists()


def test_a_resumed_evaluation_counts_what_its_reused_units_cost_the_stopped_run(tiny_model, word_tokenizer,
                                                                                 tmp_path, monkeypatch):
    """A job's CPU seconds (rule baseline's cost) cover every unit: those a stopped run finished are
    counted at what they cost there, kept beside their answers."""
    import pickle
    import sqlite3

    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate
    from gna.resume.store import COST, reused_cost, resuming

    suite = TaskSuite(extra={"kv_mc": kv_task(tmp_path, monkeypatch)})
    model, _ = tiny_model("llama")
    state = tmp_path / ".partial" / "scores.csv"
    costs = []

    def run():
        with resuming(state, "job-1"):
            evaluate(model, word_tokenizer, ["kv_mc"], suite, batch_size=3, max_length=256)
            costs.append(reused_cost())

    run()   # uninterrupted: nothing reused
    assert costs == [{"units": 0, "cpu_s": 0.0, "unpriced_units": 0}]
    stopping_after(monkeypatch, 2)
    with pytest.raises(Stop):
        run()
    stopping_after(monkeypatch, None)
    db = sqlite3.connect(state / "state.sqlite")
    kept = [pickle.loads(v) for (v,) in db.execute("SELECT value FROM units WHERE section LIKE ?", ("%" + COST,))]
    db.close()
    assert len(kept) == 2 and all(c > 0 for c in kept)
    run()
    assert costs[-1] == {"units": 2, "cpu_s": pytest.approx(sum(kept)), "unpriced_units": 0}


def test_a_unit_kept_without_its_cost_is_counted_as_unpriced(tmp_path):
    from gna.resume.store import PartialState, reused_cost, resuming, section

    d = tmp_path / ".partial" / "out.csv"
    with pytest.raises(RuntimeError), resuming(d, "k"):
        s = section("evaluate", 1)
        s.put("a", [0.5], cpu_s=2.5)
        s.put("b", [0.25])   # kept by code that did not count its seconds
        raise RuntimeError
    assert PartialState(d, "k").resumed == 2   # units, not their cost rows
    with resuming(d, "k"):
        s = section("evaluate", 1)
        for key in ("a", "b"):
            assert s.get(key) is not None
            s.reused(key)
        assert reused_cost() == {"units": 2, "cpu_s": 2.5, "unpriced_units": 1}
    assert reused_cost() == {"units": 0, "cpu_s": 0.0, "unpriced_units": 0}   # outside any job


def test_partial_state_is_keyed_private_to_its_job_and_survives_a_torn_file(tmp_path):
    from gna.resume.keys import job_key, partial_dir
    from gna.resume.store import PartialState, resuming, section

    assert partial_dir(["results/scan/llama/ranking.csv", "x"]) == Path("results/scan/llama/.partial/ranking.csv")
    assert partial_dir([]) is None
    (tmp_path / "in.txt").write_text("a")
    key = job_key("r", [str(tmp_path / "in.txt")], {"batch_size": 3}, {}, ["out.csv"])
    assert key == job_key("r", [str(tmp_path / "in.txt")], {"batch_size": 3}, {}, ["out.csv"])
    assert key != job_key("r", [str(tmp_path / "in.txt")], {"batch_size": 4}, {}, ["out.csv"])
    (tmp_path / "in.txt").write_text("b")
    assert key != job_key("r", [str(tmp_path / "in.txt")], {"batch_size": 3}, {}, ["out.csv"])

    d = tmp_path / ".partial" / "out.csv"
    with resuming(d, lambda: pytest.fail("no loop asked: no key computed")):
        pass
    assert not d.exists()
    with pytest.raises(RuntimeError), resuming(d, "k"):
        first, again = section("scan", 1), section("scan", 1)
        assert first.name != again.name  # the n-th call of a job is its own section
        first.put("u", [1.5, True])
        raise RuntimeError
    assert oct(d.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    assert PartialState(d, "k").section("scan", 1).get("u") == [1.5, True]
    (d / "state.sqlite").write_bytes(b"torn" * 64)
    assert PartialState(d, "k").resumed == 0  # unreadable: started afresh, never trusted
    PartialState(d, "k").section("scan", 1).put("u", 1)
    assert PartialState(d, "other").resumed == 0 and (d / "key").read_text() == "other"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("shared_prefix", [False, True])
def test_a_stopped_shared_conditions_evaluation_resumes_in_process(tiny_model, word_tokenizer, tmp_path,
                                                                    monkeypatch, shared_prefix):
    """Several conditions evaluated together (every depth from one forward, removals and ablations from
    their first changed layer) keep each shared batch (with contexts shared: each context), every
    condition's answers, and a stopped run resumes to the rows of an uninterrupted one, running only
    the units that were left."""
    from gna.evaluation.lm_eval_bridge import TaskSuite, tidy
    from gna.evaluation.prefix_conditions import evaluate_conditions
    from gna.resume.store import resuming

    suite = TaskSuite(extra={"kv_mc": kv_task(tmp_path, monkeypatch)})
    model, _ = tiny_model("llama")
    conditions = [[{"truncate": 1}], [{"truncate": 2}], [{"drop_layer": 1}], [{"ablate_heads": [[1, 0, "attention"]]}],
                  [{"drop_layer": 0}]]   # with contexts shared, layer 0's removal is its own evaluation, kept whole

    def run(key=None):
        if key is None:
            return [tidy(s).to_csv() for s in evaluate_conditions(model, word_tokenizer, ["kv_mc"], suite, conditions,
                                                                  batch_size=3, max_length=256,
                                                                  shared_prefix=shared_prefix)]
        with resuming(tmp_path / ".partial" / "depth1.csv", key):
            return run()

    whole, resumed, stored = stopped_then_resumed(monkeypatch, run, stop=2)
    assert resumed == whole
    # 10 prompts, one row each, in batches of 3 (4 units) or a context each (10 units, after layer 0's removal,
    # one unit): the stopped run kept 2, the resumed one stores only the rest
    assert len(stored) == (11 if shared_prefix else 4) - 2
    assert not (tmp_path / ".partial").exists()


def test_a_shared_batch_job_resumes_from_its_own_state_apart_from_its_first_conditions(tmp_path, monkeypatch):
    """The batch job of a rule whose conditions share work (gna.experiments.shared_conditions) evaluates
    inside its own resuming state, beside its first output but apart from that condition's own state:
    a stopped batch keeps what it finished, the next run reads it, and success removes it."""
    from snakemake.iocontainers import Params

    from gna.experiments import shared_conditions
    from gna.resume.store import section

    out = tmp_path / "individual" / "layer0.csv"
    batch = SimpleNamespace(rule="batch_individual_pruning_1", input=[], output=[str(out)], log=[], threads=1,
                            config={}, wildcards={}, params=Params(fromdict={"jobs": []}))

    def stopped(jobs, objects):
        section("evaluate_conditions", "tasks").put("context 1", [(-0.5, True)])
        raise Stop

    monkeypatch.setattr(shared_conditions, "run_shared", stopped)
    with pytest.raises(Stop):
        shared_conditions.run_shared_batch(batch)
    assert (out.parent / ".partial" / "layer0.csv.batch" / "state.sqlite").is_file()
    assert not (out.parent / ".partial" / "layer0.csv").exists()

    found = []
    monkeypatch.setattr(shared_conditions, "run_shared",
                        lambda jobs, objects: found.append(section("evaluate_conditions", "tasks").get("context 1")))
    shared_conditions.run_shared_batch(batch)
    assert found == [[(-0.5, True)]]
    assert not (out.parent / ".partial").exists()
