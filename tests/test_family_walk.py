"""Walk transformers' causal-LM model types: each is described by an adapter or
refused by name with its reason (gna.models.refused), never half-described and never refused
without one.

Each family is built from its default config on the meta device (no memory, no weights: the
module structure only), so the walk takes seconds per dozen families. The tiny random-init builds
of the families with adapters (ablation changes the logits and restores them bit for bit, the fast
scan equals the naive one head for head) are in tests/test_families.py and test_models.py.
"""
import warnings

import pytest
import torch
import transformers as tf
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from gna.errors import UnknownArchitectureError
from gna.models import attach_adapter
from gna.models.adapters import ADAPTERS, adapter_of_config
from gna.models.refused import NOT_IN_LOWEST_SUPPORTED, REFUSED
from gna.models.tiny import ALL_FAMILIES

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

KINDS = {"attention", "mamba1", "mamba2"}
NOT_BUILT = {  # the default config of these does not build a model in this transformers (5.x): not walked
    "cohere_compass_text": "KeyError 'full_attention'", "dbrx": "DbrxAttentionConfig has no rope_theta",
    "dots1": "TypeError in its MoE init", "dots3_note": "per-layer config of a multimodal wrapper",
    "gemma4_assistant": "config validation error", "gemma4_unified_assistant": "no num_attention_heads",
    "hunyuan_v1_dense": "rope settings None", "hunyuan_v1_moe": "rope settings None",
    "ministral": "rope settings None", "nemotron": "head_dim None", "qwen4_exp": "head_dim None",
    "qwen4_exp_text": "head_dim None", "lfm2_moe": "layer_types None", "gemma3n": "needs the timm package",
    "musicgen": "no dropout in its config", "musicgen_melody": "no dropout in its config",
    "reformer": "needs is_decoder=True",
}
MODEL_TYPES = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def meta_model(model_type: str):
    cfg = tf.CONFIG_MAPPING[model_type]()
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return tf.AutoModelForCausalLM.from_config(cfg)


def in_width(proj) -> int:
    return proj.in_features if isinstance(proj, torch.nn.Linear) else proj.weight.shape[0]


@pytest.fixture(scope="module", autouse=True)
def quiet():
    level = tf.logging.get_verbosity()
    tf.logging.set_verbosity_error()
    yield
    tf.logging.set_verbosity(level)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_causal_lm_family_is_described_or_refused_by_name(model_type):
    if model_type in NOT_BUILT:
        pytest.skip(f"default config does not build: {NOT_BUILT[model_type]}")
    model = meta_model(model_type)
    try:
        adapter = attach_adapter(model)
    except UnknownArchitectureError as e:
        assert model_type in REFUSED, f"{model_type} is refused without a reason by name: {e}"
        assert REFUSED[model_type] in str(e)
        return
    assert model_type not in REFUSED, f"{model_type} is listed as refused but {adapter.family} describes it"
    desc = adapter.describe()
    assert desc.mixers and {m.kind for m in desc.mixers} <= KINDS
    for m in desc.mixers:  # the head slices tile the projection input
        assert m.n_heads * m.head_dim == in_width(m.out_proj), (m.layer, m.kind)
    # The parse-time view (config.json alone) agrees with the loaded model's description.
    cfg = model.config.to_dict()
    structure_of = adapter_of_config(cfg, adapter.family)
    assert structure_of.structure(cfg) == (desc.n_layers, desc.n_heads_total)


def test_every_family_with_ssm_heads_has_a_tiny_build():
    """The families whose mixers include Mamba-1/Mamba-2 are built tiny in tests/test_families.py
    (ablation restores bit for bit, fast scan == naive): each such adapter builds one."""
    for adapter in ADAPTERS:
        if adapter.family in ("attention", "gpt2", "phi", "hybrid"):
            continue
        assert set(adapter.builds) & set(ALL_FAMILIES), adapter.family


def test_the_refusals_name_real_model_types():
    """Every refusal names a model type of the installed transformers, or one that is newer than the
    lowest supported (so the walk runs on every supported release)."""
    assert set(REFUSED) - (set(tf.CONFIG_MAPPING.keys()) | set(MODEL_TYPES)) <= NOT_IN_LOWEST_SUPPORTED


def test_the_model_types_new_in_5_24_are_refused_with_their_reason():
    """transformers 5.24's new token mixers (looped and nGPT layers, Gated DeltaNet) are refused by name,
    not described as attention decoders (Dory's layers would be: its heads sit in self_attn.o_proj)."""
    assert "loop" in REFUSED["dory"] and "nGPT" in REFUSED["dory"]
    assert "Gated DeltaNet" in REFUSED["lara_mini"] and "short convolutions" in REFUSED["inkling2_loop_text"]
