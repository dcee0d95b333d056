"""Top-k removal's positive control: a job's KV probe sets (``kv_probes`` in its eval settings) are scored
beside its tasks, as Fig. 4 scores them, on its own and for several conditions evaluated together."""
from pathlib import Path

import pytest
import yaml

from gna.config.schema import with_defaults
from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.experiments.run import condition_rows, evaluation_rows
from gna.models import load_model
from gna.probes.kv import generate_kv_probe, lm_eval_task_config, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
MICRO = {"path": str(ROOT / "data/models/micro-llama")}
TASK = "kv_n4_s1"
# micro-llama's top KV head (its scan's rank 1): removing it costs KV retrieval most
TOP = [{"ablate_heads": [[3, 3, "attention"]]}]


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    probe = tmp_path_factory.mktemp("probes") / "kv.jsonl"
    write_jsonl(generate_kv_probe(4, 24, 1, separator=" ", fmt="compact"), probe)
    cfg = with_defaults(yaml.safe_load((ROOT / "config.yaml").read_text()))
    return probe, {**cfg["eval"], "chat_tasks": []}


def test_a_jobs_kv_probe_is_scored_beside_its_tasks_as_fig4_scores_it(setting):
    probe, ev = setting
    model = load_model(MICRO)
    own = evaluation_rows(MICRO, [TASK], [], {**ev, "kv_probes": {TASK: str(probe)}}, None, {"model": "m"}, model=model)
    fig4 = evaluation_rows(MICRO, [TASK], [], ev, None, {"model": "m"}, model=model,
                           suite=TaskSuite(extra={TASK: lm_eval_task_config(probe, TASK, tokenizer=model[1])}))
    acc = own[(own.task == TASK) & (own.metric == "acc")].value
    assert len(acc) == 1 and acc.iloc[0] == fig4[(fig4.task == TASK) & (fig4.metric == "acc")].value.iloc[0]
    # without the probe named in kv_probes, the task is unknown: nothing is scored by accident
    with pytest.raises(Exception, match=TASK):
        evaluation_rows(MICRO, [TASK], [], ev, None, {"model": "m"}, model=model)


def test_removals_evaluated_together_score_the_control_each(setting):
    probe, ev = setting
    rows = condition_rows(MICRO, [TASK], [[], TOP], {**ev, "kv_probes": {TASK: str(probe)}}, None,
                          [{"model": "m", "k": 0}, {"model": "m", "k": 1}])
    full, removed = (r[(r.task == TASK) & (r.metric == "acc")].value.iloc[0] for r in rows)
    assert full > 0.8 and removed < full - 0.3   # the control does what it is there for
