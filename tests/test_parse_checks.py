"""Every index and path of a study config checked when the workflow is parsed:
named heads and layers of every experiment, model paths (there? config.json? JSON?), each line of
the micro task files, and schema violations as one line naming the key and the rule."""
import copy
import re
import json
import shutil
from pathlib import Path

import pytest

from gna.config import checks as config_checks
from gna.config.schema import with_defaults
from gna.errors import UnknownArchitectureError
from gna.models import attach_adapter, describe
from gna.models.adapters import adapter_of_config
from gna.models.tiny import ALL_FAMILIES, build_tiny_model
from test_early_errors import dry_run, micro_config

ROOT = Path(__file__).resolve().parents[1]
BASE = with_defaults(micro_config())


def named(model, gather, aggregate=((1, 1),)):
    return {model: {"gather": [list(h) for h in gather], "aggregate": [list(h) for h in aggregate]}}


def check(edit, tmp_path):
    cfg = copy.deepcopy(BASE)
    edit(cfg, tmp_path)
    config_checks.check(cfg, lambda m: str(ROOT / cfg["models"][m]["path"]))


def broken_copy(tmp_path, damage) -> str:
    path = tmp_path / "m"
    shutil.copytree(ROOT / "data/models/micro-llama", path)
    damage(path)
    return str(path)


def zero_layers(p: Path):
    cfg = json.loads((p / "config.json").read_text())
    (p / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 0}))


def bad_task_line(tmp_path) -> str:
    tasks = tmp_path / "tasks"
    shutil.copytree(ROOT / "data/micro/tasks", tasks)
    lines = (tasks / "micro_swde.jsonl").read_text().splitlines()
    lines[6] = lines[6][:-3]  # a line cut short
    (tasks / "micro_swde.jsonl").write_text("\n".join(lines) + "\n")
    return str(tasks)


@pytest.mark.parametrize("edit,message", [
    (lambda c, t: c["experiments"]["kv_pairs"].update(named_heads=named("micro-llama", [(99, 0)])),
     "experiments.kv_pairs.named_heads.micro-llama.gather[0] = [99, 0]: layer 99 is out of range: this attention "
     "model has 6 layers (0..5)"),
    (lambda c, t: c["experiments"]["head_keeping"].update(named_heads=named("micro-llama", [(2, 0)], [(1, 1), (3, 7)])),
     "experiments.head_keeping.named_heads.micro-llama.aggregate[1] = [3, 7]: head 7 is out of range for the "
     "attention mixer of layer 3: it has 4 heads (0..3)"),
    (lambda c, t: c["experiments"]["ssm_masking"].update(named_heads=named("micro-mamba2", [(1, 0, "attention")])),
     "experiments.ssm_masking.named_heads.micro-mamba2.gather[0] = [1, 0, 'attention']: layer 1 has no attention "
     "mixer; it has: ['mamba2']"),
    (lambda c, t: c["experiments"]["kv_pairs"].update(named_heads=named("micro-qwen", [(1, 0)])),
     "experiments.kv_pairs.named_heads names 'micro-qwen', which is not in models"),
    (lambda c, t: c["models"]["micro-llama"].update(path="data/modles/micro-llama"),
     "models.micro-llama.path = 'data/modles/micro-llama': .*data/modles/micro-llama does not exist \\(and it is "
     "not a Hugging Face id, org/name\\)$"),
    (lambda c, t: c["models"]["micro-llama"].update(path=broken_copy(t, lambda p: (p / "config.json").unlink())),
     "models.micro-llama: model directory .*/m has no config.json$"),
    (lambda c, t: c["models"]["micro-llama"].update(path=broken_copy(t, lambda p: (p / "config.json").write_text("{x"))),
     "models.micro-llama: .*/m/config.json is not JSON: "),
    (lambda c, t: c["models"]["micro-llama"].update(path=broken_copy(t, zero_layers)),
     "models.micro-llama: its config.json has num_hidden_layers = 0"),
    (lambda c, t: c["tasks"].update(micro_data=bad_task_line(t)),
     "tasks.retrieval.swde: .*/tasks/micro_swde.jsonl line 7 is not JSON \\("),
    (lambda c, t: c["experiments"]["hybrid_distillation"].update(random_heads=[1, 30]),
     "experiments.hybrid_distillation.random_heads = 30 but the teacher 'micro-llama' has only 24 heads"),
])
def test_a_bad_index_or_path_is_refused_naming_its_key(tmp_path, edit, message):
    with pytest.raises(config_checks.StudyConfigError) as e:
        check(edit, tmp_path)
    msg = str(e.value)
    assert re.match("config error: " + (message if ".*" in message else re.escape(message)), msg), msg
    assert "\n" not in msg


def test_the_shipped_configs_pass():
    check(lambda c, t: None, None)


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_the_config_json_mixers_are_the_loaded_models(family):
    """What the named heads are checked against at parse time is what the loaded model has."""
    model = build_tiny_model(family)
    cfg = model.config.to_dict()
    desc = adapter_of_config(cfg).config_description(cfg)
    assert [(m.layer, m.kind, m.n_heads) for m in desc.mixers] == [
        (m.layer, m.kind, m.n_heads) for m in describe(model).mixers]


def test_a_model_with_no_layers_is_not_an_unsupported_architecture():
    model = build_tiny_model("llama", layers=0)
    with pytest.raises(UnknownArchitectureError) as e:
        attach_adapter(model)
    assert "has num_hidden_layers = 0 in its config" in str(e.value) and "unsupported" not in str(e.value)


def test_a_named_head_out_of_range_fails_the_dry_run(tmp_path):
    cfg = micro_config()
    cfg["experiments"]["kv_pairs"]["named_heads"] = named("micro-llama", [(99, 0)])
    out = dry_run(tmp_path, cfg)
    assert out.returncode != 0
    assert "config error: experiments.kv_pairs.named_heads.micro-llama.gather[0] = [99, 0]: layer 99" in out.stdout + out.stderr
    assert not (tmp_path / "work/results").exists()


def test_a_schema_error_is_one_line_naming_the_key_and_the_rule(tmp_path):
    cfg = micro_config()
    cfg["bogus"] = 1
    cfg["experiments"]["topk_removal"]["k"] = [0, "x"]
    out = dry_run(tmp_path, cfg)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert len(text.splitlines()) < 15  # not the schema (~1,500 lines)
    errors = [line for line in text.splitlines() if line.startswith("config error: ")]
    assert errors in (["config error: (the top level): Additional properties are not allowed ('bogus' was "
                       "unexpected) (schema rule: additionalProperties False)"],
                      ["config error: experiments.topk_removal.k[1]: 'x' is not of type 'integer' (schema rule: "
                       "type 'integer')"])


def test_each_models_config_json_is_read_once(monkeypatch):
    """The checks read a model's config.json once: the shapes and the named heads share that read."""
    reads = []
    real = config_checks.local_model_config
    monkeypatch.setattr(config_checks, "local_model_config",
                        lambda path, key=None: reads.append(path) or real(path, key))
    cfg = copy.deepcopy(BASE)
    cfg["experiments"]["kv_pairs"].update(named_heads=named("micro-llama", [(1, 0)]))
    config_checks.check(cfg, lambda m: str(ROOT / cfg["models"][m]["path"]))
    assert sorted(reads) == sorted(str(ROOT / m["path"]) for m in cfg["models"].values())
