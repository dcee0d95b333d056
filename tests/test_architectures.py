"""The shipped architecture configs (data/architectures) of the paper's models: their real shapes
offline, on the meta device (no memory), as the config checks and the resource plan read them."""
import json
import shutil

import pytest
import yaml

from gna.config import architectures

from gna.config import checks as config_checks
from gna.config.architectures import ARCH_DIR, meta_model, shipped_config
from gna.errors import ConfigError
from gna.models import describe

# key: (family, layers, {(kind, heads, head_dim, kv_heads): mixers}, total heads, params in billions)
EXPECTED = {
    "llama-8b": ("attention", 32, {("attention", 32, 128, 8): 32}, 1024, 8.03),
    "llama-3b": ("attention", 28, {("attention", 24, 128, 8): 28}, 672, 3.21),
    "llama-1b": ("attention", 16, {("attention", 32, 64, 8): 16}, 512, 1.24),
    "falcon-mamba-7b": ("mamba1", 64, {("mamba1", 8192, 1, None): 64}, 64 * 8192, 7.27),
    "llamba-8b": ("llamba", 32, {("discrete-mamba2", 32, 128, None): 32}, 1024, 8.84),
    "llamba-3b": ("llamba", 28, {("discrete-mamba2", 32, 96, None): 28}, 896, 3.66),
    "llamba-8b-unaligned": ("llamba", 32, {("discrete-mamba2", 32, 128, None): 32}, 1024, 8.84),
    # Zamba2: every layer has a Mamba-2 mixer; each invocation of the shared attention block is its
    # own mixer (13 in the 7B, 9 in the 2.7B): 32 heads x 224 (7B, PROTOCOL.md), 32 x 160 (2.7B)
    "zamba2-7b": ("zamba2", 81, {("mamba2", 112, 64, None): 81, ("attention", 32, 224, 32): 13}, 9488, 7.43),
    "zamba2-2.7b": ("zamba2", 54, {("mamba2", 80, 64, None): 54, ("attention", 32, 160, 32): 9}, 4608, 2.66),
    # the real models of the pinned GGUF artifacts (gna.external.artifacts), as their GGUF files load
    "smollm2-135m": ("attention", 30, {("attention", 9, 64, 3): 30}, 270, 0.13),
    "qwen2.5-coder-1.5b": ("attention", 28, {("attention", 12, 128, 2): 28}, 336, 1.78),
}
PAPER = yaml.safe_load((ARCH_DIR.parents[1] / "workflow/configs/paper.yaml").read_text())


def test_every_paper_model_ships_its_architecture():
    ids = {m["path"] for m in PAPER["models"].values()}
    assert ids <= set(architectures.index()), sorted(ids - set(architectures.index()))
    assert set(architectures.index().values()) == set(EXPECTED)
    for key in EXPECTED:
        assert (ARCH_DIR / key / "config.json").is_file()
    assert not list(ARCH_DIR.rglob("*.safetensors")) and not list(ARCH_DIR.rglob("*.bin"))


@pytest.mark.parametrize("key", list(EXPECTED))
def test_describe_on_the_meta_device_gives_the_published_shapes(key):
    hf_id = {v: k for k, v in architectures.index().items()}[key]
    model = meta_model(shipped_config(hf_id))
    assert next(model.parameters()).device.type == "meta"
    family, layers, mixers, total, billions = EXPECTED[key]
    d = describe(model)
    counts = {}
    for m in d.mixers:
        sig = (m.kind, m.n_heads, m.head_dim, m.kv_heads)
        counts[sig] = counts.get(sig, 0) + 1
    assert (d.family, d.n_layers, counts, d.n_heads_total) == (family, layers, mixers, total)
    assert sum(p.numel() for p in model.parameters()) / 1e9 == pytest.approx(billions, abs=0.01)
    if family == "zamba2":  # one attention mixer per invocation, bracketed by its own hybrid layer
        cfg = shipped_config(hf_id)
        att = [m for m in d.mixers if m.kind == "attention"]
        assert [m.layer for m in att] == cfg["hybrid_layer_ids"]
        assert len({id(m.invocation) for m in att}) == len(att)
        assert all(m.kv_group == 1 for m in att)
    if family == "attention":  # query heads per KV head
        assert d.mixers[0].kv_group == d.mixers[0].n_heads // d.mixers[0].kv_heads


def test_the_config_checks_read_the_shipped_shapes_of_hub_models():
    # structure() of an entry with neither n_layers nor n_heads_total: the shipped config's
    assert config_checks.structure({"path": "Zyphra/Zamba2-7B"}, "Zyphra/Zamba2-7B", "zamba2-7b") == (81, 9488)
    assert config_checks.structure({"path": "cartesia-ai/Llamba-3B"}, "cartesia-ai/Llamba-3B") == (28, 896)
    # the paper preset's own values agree with them
    for name, m in PAPER["models"].items():
        L, h = config_checks.structure(m, m["path"], name)
        assert (L, h) == (EXPECTED[name][1], EXPECTED[name][3])


@pytest.mark.parametrize("key,value", [("n_layers", 30), ("n_heads_total", 672)])
def test_a_config_value_that_disagrees_with_the_architecture_is_an_error_naming_it(key, value):
    entry = {"path": "cartesia-ai/Llamba-3B", "n_layers": 28, key: value}
    with pytest.raises(config_checks.StudyConfigError, match=rf"models\.llamba-3b\.{key} = {value}.*Llamba-3B"):
        config_checks.structure(entry, entry["path"], "llamba-3b")


def test_unknown_hub_ids_keep_the_entry_values():
    assert config_checks.structure({"n_layers": 12}, "someone/unknown-model") == (12, None)


# -- loading: hub ids of Llamba reach the Llamba loader; config.json without model_type --------

def test_a_llamba_hub_id_goes_to_the_llamba_loader(monkeypatch):
    from gna.models import llamba, loading

    calls = []

    class Stop(Exception):
        pass

    def fake_load(path, **kw):
        calls.append(path)
        raise Stop

    monkeypatch.setattr(loading, "_hub_config", lambda spec: shipped_config(spec.path))
    monkeypatch.setattr(llamba, "load_llamba", fake_load)
    with pytest.raises(Stop):
        loading.load_model({"path": "goombalab/Llamba-8B-untied-unaligned"}, with_tokenizer=False)
    assert calls == ["goombalab/Llamba-8B-untied-unaligned"]
    # an unknown id with `family: llamba` too
    monkeypatch.setattr(loading, "_hub_config", lambda spec: None)
    with pytest.raises(Stop):
        loading.load_model({"path": "someone/my-llamba", "family": "llamba"}, with_tokenizer=False)
    assert calls[-1] == "someone/my-llamba"


def _tiny_llama_dir(tmp_path, drop=("model_type",)):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    for k in drop:
        raw.pop(k, None)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return tmp_path


def test_a_config_without_model_type_loads_when_its_architectures_name_the_class(tmp_path):
    from gna.models import load_model

    model, _ = load_model(str(_tiny_llama_dir(tmp_path)), with_tokenizer=False)
    assert model.config.model_type == "llama" and describe(model).n_heads_total == 8


def test_a_config_without_model_type_or_family_is_an_error_naming_its_path(tmp_path):
    from gna.models import load_model

    path = _tiny_llama_dir(tmp_path, drop=("model_type", "architectures"))
    with pytest.raises(ConfigError, match=rf"{tmp_path}/config.json has no model_type"):
        load_model(str(path), with_tokenizer=False)


def test_a_published_llamba_config_without_model_type_is_still_llamba(tmp_path):
    raw = shipped_config("cartesia-ai/Llamba-3B")
    raw.pop("model_type")
    assert architectures.model_type_of(raw) == "llamba"
    shutil.rmtree(tmp_path)
