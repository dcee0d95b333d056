"""Several conditions from one shared forward per batch (gna.evaluation.prefix_conditions): every depth
of Fig. 2, single-layer removals, head ablations, each the same (log-prob, greedy) per request as
lm-eval's own evaluation of that condition alone, for a micro model of every family."""
from pathlib import Path

import pytest
import torch
import yaml

from gna.config.schema import with_defaults
from gna.evaluation.lm_eval_bridge import encoding_once
from gna.evaluation.prefix_conditions import recording
from gna.interventions.vocabulary import applied, first_changed_layer
from gna.models import describe
from gna.models.tiny import ALL_FAMILIES

LAYERS = 3


def requests_of(tokenizer):
    """Multiple-choice requests as lm-eval builds them: shared contexts (one-token continuations grouped
    by lm-eval), multi-token continuations, contexts of different lengths in one batch."""
    contexts = ["Memorize the following dictionary : k1 is 7", "The value of key ' k3 ' is ?",
                "A B C D Answer", "k5 is 12 k6 is 40 k7 is 3 The value of key ' k6 ' is"]
    answers = [" 7", " 12", " 40 3", " A B C", " 3"]
    out = []
    for c in contexts:
        ctx = tokenizer(c, add_special_tokens=False)["input_ids"]
        for a in answers:
            out.append(((c, a), ctx, tokenizer(a, add_special_tokens=False)["input_ids"]))
    return out


def lm_of(lm_class, model, tokenizer, batch_size=4):
    return encoding_once(lm_class)(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=64,
                                   softmax_dtype=torch.float32)


def one_by_one(model, tokenizer, requests, condition, base=None):
    from lm_eval.models.huggingface import HFLM

    with applied(model, condition):
        return lm_of(base or HFLM, model, tokenizer)._loglikelihood_tokens(requests, disable_tqdm=True)


def shared(model, tokenizer, requests, conditions, base=None):
    from lm_eval.models.huggingface import HFLM

    stores = [{} for _ in conditions]
    lm = lm_of(type("R", (recording(base or HFLM),), {"conditions": conditions, "answers": stores}), model, tokenizer)
    first = lm._loglikelihood_tokens(requests, disable_tqdm=True)
    assert first == lm.last_answers[0]
    return lm.last_answers


def assert_same(got, want):
    assert [g for _, g in got] == [g for _, g in want]
    assert torch.allclose(torch.tensor([s for s, _ in got]), torch.tensor([s for s, _ in want]), atol=1e-4, rtol=0)


def head_of(model, layer):
    """A head of ``layer``, or of the nearest layer that has one (Nemotron-H: MLP-only layers)."""
    desc = describe(model)
    layer = min((i for i in range(desc.n_layers) if desc.mixers_in(i)), key=lambda i: (abs(i - layer), i))
    mixers = desc.mixers_in(layer)
    m = next((m for m in mixers if m.kind == "attention"), mixers[0])
    return [layer, m.n_heads - 1, m.kind]


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_every_condition_scores_as_its_own_evaluation(tiny_model, family):
    model, tokenizer = tiny_model(family, layers=LAYERS)
    requests = requests_of(tokenizer)
    conditions = ([[{"truncate": d}] for d in range(1, LAYERS + 1)]              # Fig. 2: every depth
                  + [[{"truncate": 2}, {"drop_layer": 0}], [{"drop_layer": 0}], [{"drop_layer": 1}]]  # Fig. 3
                  + [[{"truncate": 2}, {"ablate_heads": [head_of(model, 1)]}],    # Table 1's head search
                     [{"ablate_heads": [head_of(model, 0), head_of(model, 2)]}]])  # top-k removal
    got = shared(model, tokenizer, requests, conditions)
    wants = [one_by_one(model, tokenizer, requests, c) for c in conditions]
    for condition, g, want in zip(conditions, got, wants):
        assert_same(g, want), condition
    # the conditions score differently: a shared forward that ignored them would fail
    assert len({tuple(round(s, 4) for s, _ in w) for w in wants}) == len(conditions)


def test_with_contexts_shared_each_condition_scores_as_its_own_evaluation(tiny_model):
    """eval.shared_prefix: depths from the shared forward, a removal's or an ablation's answers of
    several tokens on the shared-context path under its interventions; each as its own evaluation."""
    from lm_eval.models.huggingface import HFLM

    from gna.evaluation.shared_prefix import sharing_contexts

    model, tokenizer = tiny_model("llama", layers=LAYERS)
    requests = requests_of(tokenizer)
    conditions = [[{"truncate": 2}], [{"truncate": 3}], [{"drop_layer": 1}], [{"ablate_heads": [[2, 0]]}]]
    base = sharing_contexts(HFLM)
    for condition, g in zip(conditions, shared(model, tokenizer, requests, conditions, base)):
        assert_same(g, one_by_one(model, tokenizer, requests, condition, base)), condition


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_with_contexts_shared_bfloat16_answers_are_each_conditions_own_to_the_bit(tiny_model, family):
    """In bfloat16 a kernel's rounding depends on its tensor's shape: the shared forward runs each
    context alone and its continuations in the batches its own evaluation uses, so every log-prob is
    equal, not close (a padded batch of contexts would flip near-tied answers)."""
    from lm_eval.models.huggingface import HFLM

    from gna.evaluation.shared_prefix import sharing_contexts

    model, tokenizer = tiny_model(family, spec={"dtype": "bfloat16"}, num_hidden_layers=4, hidden_size=128,
                                  intermediate_size=256)
    requests = requests_of(tokenizer)
    conditions = ([[{"truncate": d}] for d in range(1, 5)]
                  + [[{"truncate": 3}, {"drop_layer": 1}], [{"drop_layer": 0}],
                     [{"truncate": 3}, {"ablate_heads": [[2, 0]]}]])
    base = sharing_contexts(HFLM)
    got = shared(model, tokenizer, requests, conditions, base)
    for condition, g in zip(conditions, got):
        assert g == one_by_one(model, tokenizer, requests, condition, base), condition


def test_first_changed_layer_reads_the_interventions():
    assert first_changed_layer([{"truncate": 18}], 28) == 18
    assert first_changed_layer([{"truncate": 28}], 28) == 28
    assert first_changed_layer([{"truncate": 18}, {"drop_layer": 5}], 28) == 5
    assert first_changed_layer([{"ablate_heads": [[16, 2], [9, 1, "attention"]]}], 28) == 9
    assert first_changed_layer([{"ablate_heads": []}], 28) == 28
    assert first_changed_layer([{"keep_heads": [{"layer": 7, "heads": [1]}, {"layer": 3}]}], 28) == 3
    assert first_changed_layer([{"mask_last_row": "all"}], 28) == 0


ROOT = Path(__file__).resolve().parents[1]


def micro_eval_cfg() -> tuple[dict, dict]:
    cfg = with_defaults(yaml.safe_load((ROOT / "config.yaml").read_text()))
    return cfg, {**cfg["eval"], "chat_tasks": cfg["tasks"].get("chat_tasks", [])}


@pytest.mark.parametrize("name", ["micro-llama", pytest.param("micro-mamba2", marks=pytest.mark.slow),
                                  pytest.param("micro-zamba2", marks=pytest.mark.slow)])
def test_a_models_conditions_write_the_bytes_of_their_own_jobs(tmp_path, name):
    """Fig. 2's depths, Fig. 3's removals and a head ablation of a committed micro model, through
    lm-eval on the micro study's tasks: each condition's CSV has the bytes its own job writes."""
    from gna.experiments.run import condition_rows, evaluation_rows
    from gna.io import write_csv
    from gna.models import load_model

    cfg, eval_cfg = micro_eval_cfg()
    spec = {"path": str(ROOT / cfg["models"][name]["path"]), "dtype": "float32", "device": "cpu"}
    micro_data = str(ROOT / cfg["tasks"]["micro_data"])
    tasks = [cfg["tasks"]["mmlu"], *cfg["tasks"]["knowledge"]]
    model = load_model(spec)
    n = describe(model[0]).n_layers
    conditions = ([[{"truncate": d}] for d in range(1, n + 1)] + [[{"truncate": n - 1}, {"drop_layer": 1}]]
                  + [[{"ablate_heads": [head_of(model[0], n - 1)]}]])
    fields = [{"model": name, "condition": i} for i in range(len(conditions))]
    together = condition_rows(spec, tasks, conditions, eval_cfg, micro_data, fields, model=model)
    for i, (c, f, rows) in enumerate(zip(conditions, fields, together)):
        write_csv(rows, tmp_path / f"shared{i}.csv")
        write_csv(evaluation_rows(spec, tasks, c, eval_cfg, micro_data, f, model=model), tmp_path / f"own{i}.csv")
        assert (tmp_path / f"shared{i}.csv").read_bytes() == (tmp_path / f"own{i}.csv").read_bytes(), c
    accs = {tuple(r[r.metric == "acc"].value) for r in together}
    assert len(accs) > 2   # the depths score differently: the comparison can fail


@pytest.mark.slow
def test_smollm2_every_depth_from_one_forward_as_each_depth_alone(smollm2_dir):
    """The real model (SmolLM2-135M, 30 layers, float32): every depth, two removals and a head
    ablation from one shared forward per batch, as lm-eval scores each alone."""
    from gna.models import load_model

    model, tokenizer = load_model({"path": str(smollm2_dir), "dtype": "float32", "device": "cpu"})
    questions = ["Question: What is the capital of France?\nA. Paris\nB. Rome\nC. Berlin\nD. Madrid\nAnswer:",
                 "Question: 2 + 3 = ?\nA. 4\nB. 5\nC. 6\nD. 7\nAnswer:"]
    requests = []
    for q in questions:
        ctx = tokenizer(q, add_special_tokens=False)["input_ids"]
        for a in [" A", " B", " C", " D", " Paris is the capital"]:
            requests.append(((q, a), ctx, tokenizer(a, add_special_tokens=False)["input_ids"]))
    n = describe(model).n_layers
    conditions = ([[{"truncate": d}] for d in range(1, n + 1)]
                  + [[{"truncate": 20}, {"drop_layer": 3}], [{"drop_layer": 0}],
                     [{"truncate": 20}, {"ablate_heads": [[16, 2]]}]])
    got = shared(model, tokenizer, requests, conditions)
    for condition, g in zip(conditions, got):
        assert_same(g, one_by_one(model, tokenizer, requests, condition)), condition


def test_a_shared_batch_writes_what_each_conditions_own_job_writes(tmp_path):
    """The batch job of gradual_pruning (workflow/scripts/batch.py with ``shared``): each depth's
    file has the bytes of that depth's own run of the rule's script."""
    from types import SimpleNamespace

    from gna.experiments.shared_conditions import run_shared
    from gna.jobs.condition_batches import condition_object, run_conditions

    cfg, eval_cfg = micro_eval_cfg()
    spec = {"path": str(ROOT / "data/models/micro-llama"), "dtype": "float32", "device": "cpu"}

    def jobs(kind):
        return [{"rule": "gradual_pruning", "wildcards": {"model": "micro-llama", "depth": str(d)},
                 "script": str(ROOT / "workflow/scripts/gradual_pruning.py"), "input": [],
                 "params": {"spec": spec, "tasks": [cfg["tasks"]["mmlu"]], "interventions": [{"truncate": d}],
                            "eval": eval_cfg, "micro_data": str(ROOT / cfg["tasks"]["micro_data"]),
                            "fields": {"model": "micro-llama", "depth": d}},
                 "output": [str(tmp_path / kind / f"depth{d}.csv"), str(tmp_path / kind / f"depth{d}.answers.csv")],
                 "output_names": {"answers": 1}, "log": [str(tmp_path / kind / f"depth{d}.log")]}
                for d in (1, 2, 4)]

    (tmp_path / "together").mkdir()
    (tmp_path / "alone").mkdir()   # Snakemake makes a job's log folder
    together = jobs("together")
    run_shared(together, [condition_object(j, 1, {}) for j in together])
    run_conditions(SimpleNamespace(params=SimpleNamespace(jobs=jobs("alone")), threads=1, config={}))
    for d, name in ((d, n) for d in (1, 2, 4) for n in (f"depth{d}.csv", f"depth{d}.answers.csv")):
        assert (tmp_path / "together" / name).read_bytes() == (tmp_path / "alone" / name).read_bytes()
    assert "evaluated with 2 other condition(s)" in (tmp_path / "together" / "depth1.log").read_text()
