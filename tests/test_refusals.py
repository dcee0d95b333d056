"""What cannot work on a GPU is refused by name, not met as an IndexError or a device clash mid-run."""
import pytest
import torch

from gna.errors import InterventionError
from gna.patterns.ga_masks import ga_head_masks
from gna.interventions import collect_head_means
from gna.interventions.masked_mixing import masked_mixers
from gna.models.tiny import build_tiny_model

torch.set_num_threads(1)


def test_masked_mixing_refuses_flash_attention_by_name():
    """flash_attention_2 hands the attention function a 2-D padding mask, not the (B, 1, T, T) one
    the masked softmax adds (an IndexError, or a mask broadcast along the wrong axis)."""
    model = build_tiny_model("llama", vocab_size=64).eval()
    model.config._attn_implementation = "flash_attention_2"  # as loaded with that implementation
    ids = torch.randint(3, 64, (2, 6))
    with pytest.raises(InterventionError, match=r"layer 0's attention .*attn_implementation='flash_attention_2'"):
        with masked_mixers(model, {(0, "attention"): torch.ones(1, 4, 6, 6)}):
            model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)


def test_head_means_accumulate_on_the_activations_device():
    """The running sums follow the heads' outputs (on a GPU: CUDA, never a CPU float64 accumulator);
    meta tensors stand in for a second device here."""
    from gna.interventions.head_ablation import head_token_sum

    x, keep = torch.empty(2, 5, 3, 4, device="meta"), torch.ones(2, 5, dtype=torch.long)
    total = head_token_sum(x, keep)
    assert total.device.type == "meta" and total.shape == (3, 4) and total.dtype == torch.float64
    model = build_tiny_model("llama", vocab_size=64).eval()
    ids = torch.randint(3, 64, (2, 6))
    am = torch.ones_like(ids)
    am[1, 4:] = 0
    means = collect_head_means(model, [dict(input_ids=ids, attention_mask=am)])
    assert all(v.device == ids.device and v.dtype == torch.float32 for v in means.values())
    x = torch.randn(2, 6, 4, 8)
    assert torch.allclose(head_token_sum(x, am), x[am.bool()].double().sum(0))


def test_ga_masks_bad_mode_is_an_intervention_error():
    with pytest.raises(InterventionError, match="mode 'ful' is not"):
        ga_head_masks(None, 4, 2, {0: "gather"}, "ful")
