"""The adapter is the one place a family is described: the modules of gna.models.adapters are
discovered, the config checks read a model's structure through its adapter (without torch), and
the tiny models and the schema's family values come from the adapters."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gna.config import checks as config_checks
from gna.models.adapters import ADAPTERS, FAMILIES
from gna.models.adapters.base import Adapter
from gna.models.tiny import ALL_FAMILIES

ROOT = Path(__file__).resolve().parents[1]
ADAPTER_DIR = ROOT / "workflow/gna/models/adapters"


def test_every_adapter_module_is_discovered_with_the_fallback_last():
    modules = {p.stem for p in ADAPTER_DIR.glob("*.py")} - {"__init__", "base"}
    assert {a.__module__.rsplit(".", 1)[1] for a in ADAPTERS} == modules
    assert len(set(FAMILIES)) == len(FAMILIES) == len(modules)
    assert [a.fallback for a in ADAPTERS] == [False] * (len(ADAPTERS) - 1) + [True]
    for a in ADAPTERS:  # each family states its heads once: per layer, or (not known per layer) as a total
        per_layer = a.layer_heads.__func__ is not Adapter.layer_heads.__func__
        total = a.structure.__func__ is not Adapter.structure.__func__
        assert per_layer != total, (a.family, "layer_heads" if per_layer else "neither")
    # (that the total is what the loaded model has: tests/test_families.py, for every family)


def test_the_tiny_models_are_the_adapters_builds():
    assert sorted(ALL_FAMILIES) == sorted(n for a in ADAPTERS for n in a.builds)


def test_the_micro_recipes_name_models_an_adapter_builds():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    micro = schema["properties"]["micro"]["properties"]["models"]["additionalProperties"]
    recipes = micro["properties"]["family"]["enum"]
    from gna.micro.recipes import FAMILY_PRESETS

    assert sorted(recipes) == sorted(FAMILY_PRESETS)
    assert set(recipes) <= set(ALL_FAMILIES)


def test_the_config_checks_use_no_torch():
    """Snakemake parses the Snakefile on every call: the structure of a local model and of a Hub
    id's shipped architecture come from their config.json through the adapters, without torch."""
    code = ("import sys\n"
            "from gna.config import checks as config_checks\n"
            "print(config_checks.structure({}, 'data/models/micro-zamba2', 'z'))\n"
            "print(config_checks.structure({'adapter_options': {'channel_group': 8}}, 'data/models/micro-mamba1', 'm'))\n"
            "print(config_checks.structure({}, 'Zyphra/Zamba2-7B', 'z7'))\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "[]", out.stdout
    assert "(81, 9488)" in out.stdout


def test_the_hybrid_students_structure_counts_its_kept_heads():
    from gna.hybrid.student import build_student
    from gna.models import describe
    from gna.models.adapters.hybrid_student import HybridAdapter
    from gna.models.tiny import build_tiny_model

    student = build_student(build_tiny_model("llama", layers=3), [(0, 1), (2, 0), (2, 3)])
    d = describe(student)
    assert HybridAdapter.structure(student.config.to_dict()) == (d.n_layers, d.n_heads_total) == (3, 3 * 4 + 3)


@pytest.mark.parametrize("entry,message", [
    ({"path": "data/models/micro-llama", "family": "rwkv"}, r"models\.m\.family = 'rwkv' is not a family an "
                                                            r"adapter describes; supported families: attention"),
    ({"random": {"family": "rwkv"}}, r"models\.m\.random\.family = 'rwkv' is not a model the adapters can build: "
                                     r"llama, .*olmo"),
    ({"path": "data/models/micro-llama", "adapter_options": {"channel_group": 2}},
     r"models\.m\.adapter_options: the attention adapter takes no options; got \['channel_group'\]"),
])
def test_a_family_or_option_the_adapters_do_not_know_is_a_config_error_naming_the_key(entry, message):
    with pytest.raises(config_checks.StudyConfigError, match=message):
        config_checks.structure(entry, entry.get("path", "results/models/m"), "m")
