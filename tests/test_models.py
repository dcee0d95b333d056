"""Adapters: every family loads through the real loader and is described uniformly."""
import pytest
import torch
import transformers as tf

from gna.errors import GnaError, HeadIndexError, LayerIndexError, UnknownArchitectureError
from gna.models import describe, load_model
from gna.models.tiny import FAMILIES

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

EXPECTED = {  # family -> (adapter family, mixer kinds of layer 1, heads per mixer)
    "llama": ("attention", ["attention"], [4]),
    "qwen2": ("attention", ["attention"], [4]),
    "mamba1": ("mamba1", ["mamba1"], [64]),
    "falcon-mamba": ("mamba1", ["mamba1"], [64]),
    "mamba2": ("mamba2", ["mamba2"], [8]),
    "zamba2": ("zamba2", ["attention", "mamba2"], [4, 8]),
    "llamba": ("llamba", ["discrete-mamba2"], [4]),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_loader_describes_every_family(tiny_model, family):
    model, tok = tiny_model(family)
    desc = describe(model)
    fam, kinds, heads = EXPECTED[family]
    assert desc.family == fam and desc.n_layers == 2
    layer1 = desc.mixers_in(1)
    assert [m.kind for m in layer1] == kinds
    assert [m.n_heads for m in layer1] == heads
    for m in desc.mixers:  # the head slices tile the out-projection input exactly
        assert m.n_heads * m.head_dim == m.out_proj.in_features
    assert tok.bos_token_id is not None and not model.training


def test_gqa_grouping_is_described(tiny_model):
    m = describe(tiny_model("qwen2")[0]).mixer(0)
    assert (m.kv_heads, m.kv_group, m.kv_head_of(3)) == (2, 2, 1)


def test_mamba1_channel_grouping(tiny_model):
    model, _ = tiny_model("mamba1", spec={"adapter_options": {"channel_group": 16}})
    m = describe(model).mixer(0)
    assert (m.n_heads, m.head_dim) == (4, 16)
    with pytest.raises(GnaError, match="channel_group"):
        tiny_model("mamba1", spec={"adapter_options": {"channel_group": 5}})


def test_unknown_architecture_names_it_and_lists_families(tmp_path):
    # GPT-2 has an adapter now (tests/test_families.py); RWKV has none.
    cfg = tf.RwkvConfig(num_hidden_layers=2, hidden_size=16, attention_hidden_size=16, intermediate_size=32,
                        vocab_size=50)
    tf.RwkvForCausalLM(cfg).save_pretrained(tmp_path)
    with pytest.raises(UnknownArchitectureError, match=r"RwkvForCausalLM.*attention.*llamba.*mamba1.*mamba2.*zamba2"):
        load_model({"path": str(tmp_path)}, with_tokenizer=False)


def test_unknown_family_and_missing_directory_are_named(tiny_model_dir):
    with pytest.raises(UnknownArchitectureError, match="'rwkv'"):
        load_model({"path": tiny_model_dir("llama"), "family": "rwkv"}, with_tokenizer=False)
    with pytest.raises(GnaError, match="does not exist"):
        load_model({"path": "/nonexistent/model"}, with_tokenizer=False)
    with pytest.raises(GnaError, match="unknown model spec field"):
        load_model({"path": tiny_model_dir("llama"), "dtyp": "float32"})


def test_head_and_layer_errors(tiny_model):
    desc = describe(tiny_model("zamba2")[0])
    with pytest.raises(LayerIndexError, match=r"layer 2 is out of range.*2 layers"):
        desc.head((2, 0))
    with pytest.raises(HeadIndexError, match=r"head 4 is out of range.*4 heads"):
        desc.head((1, 4, "attention"))
    with pytest.raises(HeadIndexError, match="several mixers"):
        desc.head((1, 0))  # hybrid layer: attention and mamba2
    with pytest.raises(HeadIndexError, match="no attention mixer"):
        desc.head((0, 0, "attention"))
    assert desc.head((0, 7))[1] == 7


def test_dtype_is_honoured(tiny_model):
    model, _ = tiny_model("llama", spec={"dtype": "bfloat16"})
    assert next(model.parameters()).dtype == torch.bfloat16
