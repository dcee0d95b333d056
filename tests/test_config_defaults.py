"""Defaults live in the schema only (workflow/schemas/config.schema.yaml). The workflow validates its
config (common.smk: snakemake.utils.validate fills the schema's defaults in), and the rules, scripts
and library read those keys directly, ``config["scan"]["max_rows"]``, never ``.get(key, default)``:
here, every config the repository ships carries each of them once validated, a config that leaves
them out gets the schema's values, and gna.config.schema.with_defaults validates as the workflow does."""
import copy
import re
from pathlib import Path

import pytest
import yaml

from gna.config.schema import SCHEMA, defaults_of, with_defaults
from gna.config.study import study_from_files

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [ROOT / "config.yaml", *sorted((ROOT / "workflow/configs").glob("*.yaml"))]

# Keys the code reads directly, relying on the schema's default where a config leaves them out
# (inside an optional object: where that object is there).
READ_DIRECTLY = [
    "threads_per_job", "gpus_per_job", "dtype", "device", "eval", "experiments",
    "eval.batch_size", "eval.max_length", "eval.limit", "eval.num_fewshot", "eval.add_bos_token",
    "eval.fewshot_as_multiturn", "eval.task_definitions",
    "kv_probe.separator", "kv_probe.seed",
    "scan.batch_size", "scan.max_rows", "scan.classify_top", "scan.classify_examples", "scan.threshold",
    "experiments.layer_pruning.tolerance", "experiments.layer_pruning.knowledge_tolerance",
    "experiments.layer_pruning.knowledge_margin", "experiments.head_keeping.scan_heads",
    "experiments.layer_pruning.collapse", "experiments.layer_pruning.mmlu_chance",
    "experiments.head_keeping.heads_per_layer",
    "experiments.kv_pairs.probe_seeds",
    "experiments.topk_removal.random_draws",
    "experiments.ssm_masking.modes",
    "experiments.hybrid_attention.modes",
    "experiments.layer_swap.state_size", "experiments.layer_swap.chunk_size",
    "experiments.hybrid_distillation.lr", "experiments.hybrid_distillation.data",
    "experiments.hybrid_distillation.data.source", "experiments.hybrid_distillation.state_size",
    "experiments.hybrid_distillation.random_heads", "experiments.hybrid_distillation.random_seeds",
    "experiments.hybrid_distillation.chunk_size", "experiments.hybrid_distillation.save_every",
    "experiments.hybrid_distillation.micro_batch_size", "experiments.hybrid_distillation.vocab_chunk",
    "experiments.hybrid_distillation.ssm_init", "experiments.hybrid_distillation.combine",
    "experiments.hybrid_distillation.heldout_batches", "experiments.hybrid_distillation.kv_separator",
    "experiments.hybrid_distillation.kv_eval_seeds",
    "micro.world", "micro.shipped_dir", "micro.shipped_data", "micro.models",
    "benchmarks", "benchmarks.mmlu", "benchmarks.mmlu.source", "benchmarks.mmlu.size", "benchmarks.mmlu.seed",
    "benchmarks.mmlu.models",
]
# Containers: their keys' defaults fill in once the schema gives the container itself one.
CONTAINERS = {"eval", "experiments", "experiments.hybrid_distillation.data", "benchmarks", "benchmarks.mmlu"}
MISSING = object()


def study_of(config: Path) -> dict:
    """A shipped config file's study: the file itself, or, where it extends a preset (the own-model
    template), the preset with the file laid on it, as the Snakefile builds it."""
    return study_from_files([config], ROOT) or yaml.safe_load(config.read_text())


def schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text())


def schema_node(path: str) -> dict:
    """The schema of the key at dotted ``path`` (local $refs followed)."""
    root = node = schema()
    for part in path.split("."):
        node = node["properties"][part]
        while "$ref" in node and "properties" not in node:
            target = root
            for key in node["$ref"].removeprefix("#/").split("/"):
                target = target[key]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def get(cfg: dict, path: str):
    for part in path.split("."):
        if not isinstance(cfg, dict) or part not in cfg:
            return MISSING
        cfg = cfg[part]
    return cfg


def parent_there(cfg: dict, path: str) -> bool:
    return "." not in path or isinstance(get(cfg, path.rsplit(".", 1)[0]), dict)


def drop(cfg: dict, path: str) -> None:
    parent = get(cfg, path.rsplit(".", 1)[0]) if "." in path else cfg
    if isinstance(parent, dict):
        parent.pop(path.rsplit(".", 1)[-1], None)


def test_every_key_read_directly_has_its_default_in_the_schema():
    for path in READ_DIRECTLY:
        assert "default" in schema_node(path), f"{path}: read directly, but the schema gives it no default"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_each_shipped_config_carries_every_default_once_validated(config):
    raw = study_of(config)
    cfg = with_defaults(raw)
    checked = 0
    for path in READ_DIRECTLY:
        if parent_there(cfg, path):
            value = get(cfg, path)
            assert value is not MISSING, f"{config.name}: {path} missing after validation"
            if get(raw, path) is not MISSING and path not in CONTAINERS:  # validation keeps what is said
                assert value == get(raw, path), path
            checked += 1
    assert checked >= 17  # at least the top-level, eval and scan keys
    assert study_of(config) == raw  # with_defaults validates a copy


def test_a_config_that_leaves_the_defaults_out_gets_the_schemas():
    full = yaml.safe_load((ROOT / "config.yaml").read_text())
    for exp in ("ssm_masking", "hybrid_attention", "layer_swap", "hybrid_distillation"):
        assert exp in full["experiments"]
    bare = copy.deepcopy(full)
    leaves = [p for p in READ_DIRECTLY if p not in CONTAINERS]
    for path in sorted(leaves, key=lambda p: -p.count(".")):
        drop(bare, path)
    present = [p for p in leaves if parent_there(bare, p)]
    assert len(present) > 35
    assert all(get(bare, p) is MISSING for p in present)  # before validation: none of them
    cfg = with_defaults(bare)
    for path in present:
        assert get(cfg, path) == schema_node(path)["default"], path


def test_a_config_without_eval_or_experiments_gets_every_eval_default_and_no_experiment():
    bare = yaml.safe_load((ROOT / "config.yaml").read_text())
    del bare["eval"], bare["experiments"], bare["micro"]
    cfg = with_defaults(bare)
    assert cfg["eval"] == {"batch_size": 32, "max_length": 2048, "limit": None, "num_fewshot": 0,
                           "add_bos_token": None, "fewshot_as_multiturn": False, "task_definitions": "installed"}
    assert cfg["experiments"] == {}
    assert "micro" not in cfg  # an optional object without a default stays out: micro.smk uses defaults_of
    assert defaults_of("micro") == with_defaults({**bare, "micro": {}})["micro"]
    assert defaults_of("micro") == {"world": {}, "shipped_dir": "data/models", "shipped_data": "data/micro/tasks",
                                    "models": {}}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_the_workflow_validates_its_config_as_with_defaults_does(config, tmp_path):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, ResourceSettings

    with SnakemakeApi() as api:
        wf = api.workflow(snakefile=ROOT / "Snakefile", workdir=tmp_path, resource_settings=ResourceSettings(),
                          config_settings=ConfigSettings(configfiles=[config]))
        seen = copy.deepcopy(dict(wf._workflow.config))
    expected = with_defaults(study_of(config))
    # the workflow resolves the micro task files against the repository (another working directory)
    if "micro_data" in expected["tasks"]:
        assert Path(seen["tasks"]["micro_data"]) == ROOT / expected["tasks"]["micro_data"]
        seen["tasks"]["micro_data"] = expected["tasks"]["micro_data"]
    assert seen == expected


# Keys whose default only the schema states: a `.get("key", default)` of them restates it.
NO_RESTATED_DEFAULT = ("threads_per_job", "gpus_per_job", "dtype", "device", "max_length", "num_fewshot",
                       "max_rows", "classify_top", "classify_examples", "threshold", "tolerance",
                       "knowledge_tolerance", "knowledge_margin", "scan_heads", "collapse", "mmlu_chance", "heads_per_layer", "random_seeds",
                       "random_heads", "state_size", "chunk_size", "save_every", "heldout_batches", "ssm_init",
                       "combine", "shipped_dir", "shipped_data", "modes")


def test_no_rule_script_or_library_module_restates_a_schema_default():
    pattern = re.compile(r"""\.get\(\s*["'](%s)["']\s*,""" % "|".join(NO_RESTATED_DEFAULT))
    files = [*(ROOT / "workflow/rules").rglob("*.smk"), *(ROOT / "workflow/scripts").glob("*.py"),
             *(ROOT / "workflow/gna").rglob("*.py")]
    found = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}" for f in files
             for n, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)
