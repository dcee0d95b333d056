"""BBH rebuilt from the pinned BIG-bench files: each subtask's formatter turns BIG-bench items into
BBH's (hand-checked items, lm-eval's own exemplars), every request is lm-eval 0.4.13's own
``bbh_cot_fewshot_<subtask>`` task's for the same documents at 0 shots, and the group ``bbh_local``
aggregates as lm-eval's ``bbh`` does."""
import json
import re
from pathlib import Path

import pytest

from gna.errors import ConfigError
from gna.evaluation import local_bbh, local_suite

# BIG-bench items beside BBH's text of them: lm-eval's exemplars where BIG-bench holds them, else checked by hand
FORMATS = json.loads((Path(__file__).parent / "data/bbh_formats.json").read_text(encoding="utf-8"))
# the three subtasks BBH keeps whole: its counts
WHOLE = {"causal_judgement": 187, "penguins_in_a_table": 146, "snarks": 178}


def lm_eval_yaml(name: str) -> dict:
    import lm_eval
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(Path(lm_eval.__file__).parent / "tasks/bbh/cot_fewshot" / name)


def lm_eval_exemplars(subtask: str) -> list[tuple[str, str]]:
    """lm-eval's chain-of-thought exemplars of ``subtask``: (BBH's input, the answer its reasoning ends on)."""
    return [(s["input"], re.search(r"the answer is (.*)\.\s*$", s["target"], re.S)[1])
            for s in lm_eval_yaml(f"{subtask}.yaml")["fewshot_config"]["samples"]]


def fake_bigbench(root: Path) -> Path:
    """A bigbench archive folder holding, for each subtask, only the items of the format fixtures."""
    for subtask, fixture in FORMATS.items():
        path = root / local_bbh.member(subtask)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"task_prefix": fixture.get("task_prefix", ""),
                                    "examples": [c["item"] for c in fixture["cases"]]}), encoding="utf-8")
    return root


@pytest.mark.parametrize("subtask", local_bbh.SUBTASKS)
def test_each_subtask_turns_bigbench_items_into_bbhs_text(subtask):
    fixture = FORMATS[subtask]
    fmt = local_bbh.FORMATS[subtask][1]
    for case in fixture["cases"]:
        assert fmt(case["item"], {"task_prefix": fixture.get("task_prefix", "")}) == (case["input"], case["target"])


def test_the_subtasks_are_bbhs_less_those_left_out():
    import lm_eval

    folder = Path(lm_eval.__file__).parent / "tasks/bbh/cot_fewshot"
    bbh = sorted(p.stem for p in folder.glob("*.yaml") if not p.stem.startswith("_"))
    assert len(bbh) == local_bbh.BBH_SUBTASKS == 27
    left_out = {"boolean_expressions", "multistep_arithmetic_two", "web_of_lies",   # generator code only
                "date_understanding", "temporal_sequences",                         # BBH reordered the options
                "movie_recommendation", "reasoning_about_colored_objects",          # BBH rewrote the options
                "logical_deduction_five_objects", "logical_deduction_seven_objects", "logical_deduction_three_objects",
                "sports_understanding",                                             # BBH rewrote the questions
                "geometric_shapes"}                                                 # BIG-bench: several golds
    assert sorted(set(local_bbh.SUBTASKS) | left_out) == bbh and not set(local_bbh.SUBTASKS) & left_out
    assert set(FORMATS) == set(local_bbh.SUBTASKS)


def requests_of(config: dict) -> dict[int, tuple]:
    from lm_eval.api.task import ConfigurableTask

    task = ConfigurableTask(config=config)
    task.set_config(key="num_fewshot", value=0)
    task.build_all_requests(rank=0, world_size=1)
    docs = list(task.eval_docs)
    return {i.doc_id: (i.arguments, task.OUTPUT_TYPE, task.doc_to_target(docs[i.doc_id]), task.config.filter_list,
                       task.config.metric_list) for i in task.instances}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = fake_bigbench(tmp_path_factory.mktemp("bigbench"))
    out = tmp_path_factory.mktemp("tasks")
    return out, local_suite.build(None, out, ["bbh"], seed=0, bbh_root=root)


def test_requests_are_lm_evals_own_string_for_string_and_the_group_aggregates_as_bbh(built, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out, manifest = built
    (group,) = local_suite.task_configs(out, ["bbh_local"])
    assert group["group"] == "bbh_local" and len(group["task"]) == len(local_bbh.SUBTASKS)
    assert group["aggregate_metric_list"] == lm_eval_yaml("_bbh.yaml")["aggregate_metric_list"]
    configs = {c["task"]: c for c in group["task"]}
    assert sorted(configs) == sorted(local_bbh.task_name(s) for s in local_bbh.SUBTASKS)
    for subtask in local_bbh.SUBTASKS:
        theirs = lm_eval_yaml(f"{subtask}.yaml")
        config = configs[theirs["task"] + "_local"]
        for key in ("dataset_path", "dataset_name", "test_split", "num_fewshot"):
            theirs.pop(key)
        data = out / manifest["per_task"]["bbh"]["per_subtask"][subtask]["file"]
        theirs.update(dataset_path="json", dataset_kwargs={"data_files": {"test": str(data)}}, test_split="test")
        ours = requests_of(config)
        assert len(ours) == len(FORMATS[subtask]["cases"])
        assert ours == requests_of(theirs)
    context, generation = requests_of(configs[local_bbh.task_name("causal_judgement")])[0][0]
    assert context.startswith("Answer questions about causal attribution.\n\nQ: How would a typical person answer")
    assert context.endswith("\nOptions:\n- Yes\n- No\nA: Let's think step by step.\n")
    assert generation == {"max_gen_toks": 1024, "until": ["</s>", "Q", "\n\n"], "do_sample": False, "temperature": 0.0}


def test_the_group_runs_and_its_score_and_each_subtasks_keep_their_filter(built, tmp_path, tiny_model, monkeypatch):
    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate, tidy

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = tmp_path / "one"
    local_suite.build(None, out, ["bbh"], size=1, seed=0, bbh_root=fake_bigbench(tmp_path / "bigbench"))
    # three subtasks of the build (the test model generates all 1,024 tokens: ~1.7 s an item)
    kept = ["hyperbaton", "navigate", "object_counting"]
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["per_task"]["bbh"]["per_subtask"] = {s: manifest["per_task"]["bbh"]["per_subtask"][s] for s in kept}
    (out / "manifest.json").write_text(json.dumps(manifest))
    suite = TaskSuite(local_suite_dir=str(out))
    model, tok = tiny_model("llama")
    rows = tidy(evaluate(model, tok, ["bbh_local"], suite, batch_size=4, max_length=1100))
    assert sorted(rows.task) == sorted([local_bbh.GROUP] + [local_bbh.result_name(s) for s in kept])
    assert set(zip(rows.metric, rows["filter"])) == {("exact_match", "get-answer")}
    assert rows.set_index("task").n.to_dict() == {**{local_bbh.result_name(s): 1 for s in kept}, local_bbh.GROUP: 3}
    assert rows.ci_high.notna().all()
    assert set(local_suite.summary(rows)) == {"bbh_local_exact_match"}
    with pytest.raises(ConfigError, match="no exemplars"):
        evaluate(model, tok, ["bbh_local"], suite, num_fewshot=3)


def test_a_missing_archive_or_a_malformed_item_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="no bigbench archive"):
        local_suite.build(None, tmp_path / "a", ["bbh"])
    with pytest.raises(ConfigError, match="fetch the bigbench archive first"):
        local_suite.build(None, tmp_path / "b", ["bbh"], bbh_root=tmp_path / "empty")
    root = fake_bigbench(tmp_path / "bigbench")
    path = root / local_bbh.member("hyperbaton")
    path.write_text(json.dumps({"examples": [{"input": "Which sentence?", "target_scores": {"a": 1, "b": 0}}]}))
    with pytest.raises(ConfigError, match=r"bbh hyperbaton: item 0 .* not in the form"):
        local_suite.build(None, tmp_path / "c", ["bbh"], bbh_root=root)
    assert not any((tmp_path / d).exists() for d in "abc")


@pytest.mark.slow
def test_lm_evals_exemplars_are_bigbench_items_and_are_dropped(bigbench_dir):
    for subtask in local_bbh.SUBTASKS:
        folder, fmt, dropped, _ = local_bbh.FORMATS[subtask]
        task = json.loads((bigbench_dir / local_bbh.member(subtask)).read_text(encoding="utf-8"))
        formatted = [fmt(e, task) for e in task["examples"]]
        found = [[i for i, (text, _) in enumerate(formatted) if text == x] for x, _ in lm_eval_exemplars(subtask)]
        if subtask in ("object_counting", "tracking_shuffled_objects_five_objects",
                       "tracking_shuffled_objects_seven_objects"):
            assert found == [[], [], []]   # its exemplars are not items of this file
            continue
        assert found == [[i] for i in dropped]
        assert [formatted[i][1] for i in dropped] == [a for _, a in lm_eval_exemplars(subtask)]


@pytest.mark.slow
def test_the_full_build_has_bbhs_counts_and_a_seeded_draw(bigbench_dir, tmp_path):
    a = local_suite.build(None, tmp_path / "a", ["bbh"], seed=0, bbh_root=bigbench_dir)["per_task"]["bbh"]
    assert a["subtasks"] == "15 of 27" and a["size"] == 3511
    sizes = {s: e["size"] for s, e in a["per_subtask"].items()}
    assert sizes == {s: WHOLE.get(s, 250) for s in local_bbh.SUBTASKS}
    assert all(e["documents"] == WHOLE[s] for s, e in a["per_subtask"].items() if s in WHOLE)
    b = local_suite.build(None, tmp_path / "b", ["bbh"], seed=0, bbh_root=bigbench_dir)
    c = local_suite.build(None, tmp_path / "c", ["bbh"], seed=1, bbh_root=bigbench_dir)
    name = a["per_subtask"]["hyperbaton"]["file"]
    assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text() != (tmp_path / "c" / name).read_text()
    assert b["per_task"]["bbh"] == a
    whole = tmp_path / "a" / a["per_subtask"]["snarks"]["file"]
    assert whole.read_text() == (tmp_path / "c" / a["per_subtask"]["snarks"]["file"]).read_text()
