"""lm-eval as the official code ran it (0.4.7 defaults, task definitions), passed and recorded."""
from pathlib import Path

import pytest
import torch
import yaml

from gna.config.schema import with_defaults
from gna.errors import ConfigError
from gna.experiments.run import evaluation_rows
from gna.evaluation.lm_eval_047 import LM_EVAL_047, OFFICIAL_SETTINGS, task_config
from gna.models import load_model

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
MICRO = {"path": str(ROOT / "data/models/micro-llama")}


def eval_cfg(config: str) -> dict:
    cfg = with_defaults(yaml.safe_load((ROOT / config).read_text()))
    return {**cfg["eval"], "chat_tasks": cfg["tasks"].get("chat_tasks", [])}


class _Suite:
    def resolve(self, names):
        return list(names), None


def _captured_run(monkeypatch, cfg: dict, tasks=("swde",)):
    """Rows of an evaluation under ``cfg`` with lm-eval's ``simple_evaluate`` stubbed: what HFLM
    and simple_evaluate were given, and the token ids of one request as the HFLM encodes it."""
    import lm_eval
    import lm_eval.models.huggingface as hf

    seen = {}

    class SpyHFLM(hf.HFLM):
        def __init__(self, **kw):
            seen["hflm"] = kw
            super().__init__(**kw)

    def fake(model, tasks, **kw):
        seen["evaluate"], seen["tasks"] = kw, tasks
        seen["ids"] = model.tok_encode("Question: what is the capital?")
        return {"results": {"swde": {"contains,none": 0.5, "alias": "swde"}}, "versions": {"swde": 0}}

    monkeypatch.setattr(hf, "HFLM", SpyHFLM)
    monkeypatch.setattr(lm_eval, "simple_evaluate", fake)
    model, tok = load_model(MICRO)
    rows = evaluation_rows(MICRO, list(tasks), [], cfg, None, {"model": "m"}, model=(model, tok), suite=_Suite())
    return rows, seen, model, tok


def test_paper_preset_runs_lm_eval_047s_defaults_and_sends_no_bos(monkeypatch):
    cfg = eval_cfg("workflow/configs/paper.yaml")
    assert {k: cfg[k] for k in OFFICIAL_SETTINGS} == OFFICIAL_SETTINGS
    rows, seen, model, tok = _captured_run(monkeypatch, cfg)
    assert seen["hflm"]["add_bos_token"] is False and seen["hflm"]["max_length"] is None
    assert seen["hflm"]["softmax_dtype"] == torch.float32          # fp32 log-probs whatever the model's dtype
    assert seen["evaluate"]["fewshot_as_multiturn"] is False and seen["evaluate"]["num_fewshot"] == 0
    assert tok.bos_token_id is not None and seen["ids"][0] != tok.bos_token_id
    # swde as of 0.4.7: the version-0 class under the same task name
    (swde,) = seen["tasks"]
    assert swde["task"] == "swde" and swde["class"].VERSION == 0
    row = rows.iloc[0]
    assert not row.add_bos_token and not row.fewshot_as_multiturn and row.task_definitions == LM_EVAL_047
    assert row.max_length == model.config.max_position_embeddings   # lm-eval 0.4.7's rule: the model config
    assert row.task_version == "0"


def test_default_preset_keeps_the_tokenizers_bos_and_records_it(monkeypatch):
    rows, seen, _, tok = _captured_run(monkeypatch, eval_cfg("config.yaml"))
    assert seen["hflm"]["add_bos_token"] is None and seen["ids"][0] == tok.bos_token_id
    assert seen["tasks"] == ["swde"]                                 # the installed definition
    row = rows.iloc[0]
    assert row.add_bos_token and row.max_length == 1024 and row.task_definitions == "installed"


def test_swde_v0_uses_prompt_and_value_unstripped(monkeypatch):
    import datasets
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import TaskManager

    doc = {"text": "  Name: Acme\n Price:", "value": " 42 "}
    monkeypatch.setattr(ConfigurableTask, "download",
                        lambda self, *a, **k: setattr(self, "dataset", {"validation": datasets.Dataset.from_list([doc])}))
    manager = TaskManager(include_defaults=False)
    task = manager.load([task_config("swde", LM_EVAL_047)])["tasks"]["swde"]
    assert task.VERSION == 0 and task.config.metadata["version"] == 0
    assert task.doc_to_text(doc) == doc["text"] and task.doc_to_target(doc) == " 42 "
    assert task_config("swde", "installed") == "swde" and task_config("mmlu", LM_EVAL_047) == "mmlu"


def test_a_few_shot_bbh_under_047_definitions_is_refused_before_any_work():
    from gna.evaluation.lm_eval_bridge import evaluate
    with pytest.raises(ConfigError, match="bbh"):
        evaluate(torch.nn.Linear(1, 1), None, ["bbh"], _Suite(), num_fewshot={"bbh": 3},
                 task_definitions=LM_EVAL_047)
    with pytest.raises(ConfigError, match="task_definitions"):
        task_config("swde", "0.4.8")
