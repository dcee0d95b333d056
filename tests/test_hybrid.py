"""The hybrid student: weight transfer, save/load, distillation stages, resumable checkpoints, layer swap."""
import copy
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM

from gna.errors import ConfigError, HeadIndexError
from gna.hybrid.distillation import distill
from gna.hybrid.student import build_student, heads_from_ranking, random_heads, to_llamba
from gna.hybrid.swap import AttentionLayerShim, align_student, swap_teacher_layer
from gna.interventions import ablate_heads, replace_layers, swap_layer
from gna.models import describe
from gna.models.adapters.hybrid_student import HybridAdapter
from gna.models.hybrid_student import HybridForCausalLM
from gna.models.llamba import LlambaForCausalLM
from gna.models.tiny import build_tiny_model

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

H, KV, L = 4, 2, 2  # tiny Llama: 4 query heads in 2 GQA groups, 2 layers


@pytest.fixture(scope="module")
def teacher():
    return build_tiny_model("llama", num_key_value_heads=KV, vocab_size=64)


def batches(n=4, batch=2, T=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, 64, (batch, T), generator=g) for _ in range(n)]


def logits(model, x, **kw):
    with torch.no_grad():
        return model(input_ids=x, use_cache=False, **kw).logits


def silence_ssm(student):
    with torch.no_grad():
        for layer in student.backbone.layers:
            layer.mixer.out_proj.weight.zero_()
    return student


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_every_head_kept_and_the_ssm_silenced_is_the_teacher(teacher, family):
    if family == "qwen2":  # GQA with q/k/v biases (made non-zero) and no o_proj bias
        teacher = build_tiny_model("qwen2", vocab_size=64)
        with torch.no_grad():
            for layer in teacher.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_()
    student = silence_ssm(build_student(teacher, [(l, h) for l in range(L) for h in range(H)], 8, chunk_size=16))
    x = batches(1)[0]
    assert torch.allclose(logits(student, x), logits(teacher, x), atol=1e-6)


def test_kept_heads_are_the_teachers_with_the_others_ablated(teacher):
    """Each kept head has its own K/V, copied from its GQA group: with the SSM silent, the student
    is the teacher with every other head ablated."""
    kept = [(0, 3), (0, 0), (1, 1)]
    student = silence_ssm(build_student(teacher, kept, 8, chunk_size=16))
    assert student.config.attn_heads == [[0, 3], [1]] and student.config.kept_heads == [(0, 0), (0, 3), (1, 1)]
    hd = describe(teacher).mixer(0).head_dim
    k_t, k_s = teacher.model.layers[0].self_attn.k_proj.weight, student.backbone.layers[0].attn.k_proj.weight
    assert torch.equal(k_s[hd:], k_t[hd:])  # student head 1 = teacher head 3, KV group 1
    x = batches(1)[0]
    with ablate_heads(teacher, [(l, h) for l in range(L) for h in range(H) if (l, h) not in kept]):
        ref = logits(teacher, x)
    assert torch.allclose(logits(student, x), ref, atol=1e-6)
    assert not torch.allclose(logits(build_student(teacher, kept, 8, chunk_size=16), x), ref, atol=1e-3)


def test_save_load_round_trip_and_description(teacher, tmp_path):
    student = build_student(teacher, [(0, 1), (0, 2), (1, 3)], 8, chunk_size=16)
    x = batches(1)[0]
    student.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, HybridForCausalLM) and loaded.config.attn_heads == [[1, 2], [3]]
    assert torch.equal(logits(loaded, x), logits(student, x))
    desc = HybridAdapter(student).describe()
    assert [(m.layer, m.kind, m.n_heads) for m in desc.mixers] == [
        (0, "discrete-mamba2", H, ), (0, "attention", 2), (1, "discrete-mamba2", H), (1, "attention", 1)]


def test_adapter_combine_and_attention_init_build_and_train(teacher, tmp_path):
    student = build_student(teacher, [(0, 1)], 8, chunk_size=16, combine="adapter", ssm_init="attention")
    x = batches(1)[0]
    out = student(input_ids=x).logits
    out.logsumexp(-1).mean().backward()
    assert torch.isfinite(out).all() and student.backbone.layers[0].adapter.out_proj.weight.grad.abs().sum() > 0
    mixer, v = student.backbone.layers[1].mixer, teacher.model.layers[1].self_attn.v_proj.weight
    hd = mixer.head_dim
    assert torch.equal(mixer.in_proj.weight[3 * hd:4 * hd], v[hd:])  # value head 3 <- V of GQA group 1
    assert torch.equal(mixer.out_proj.weight, teacher.model.layers[1].self_attn.o_proj.weight)
    student.save_pretrained(tmp_path)
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(tmp_path).eval(), x), logits(student, x))
    with pytest.raises(ConfigError, match="ssm_init"):
        build_student(teacher, [], 8, ssm_init="zeros")
    with pytest.raises(HeadIndexError):
        build_student(teacher, [(0, H)], 8)


def test_random_heads_and_ranking(teacher):
    desc = describe(teacher)
    a, b = random_heads(desc, 3, seed=1), random_heads(desc, 3, seed=1)
    assert a == b and len(set(a)) == 3 and random_heads(desc, 3, seed=2) != a
    assert len(random_heads(desc, L * H, 0)) == L * H
    with pytest.raises(HeadIndexError):
        random_heads(desc, L * H + 1, 0)
    ranking = pd.DataFrame(dict(layer=[1, 0, 0], head=[2, 3, 0], kind="attention", rank=[2, 1, 3]))
    assert heads_from_ranking(ranking, 2) == [(0, 3), (1, 2)]


@pytest.mark.parametrize("stage,lr", [(1, 3e-2), (2, 3e-3), (3, 3e-3)])
def test_each_stage_lowers_its_loss(teacher, tmp_path, stage, lr):
    student = build_student(teacher, [(0, 1)] if stage > 1 else [], 8, chunk_size=16)
    data = batches(2)
    state = distill(teacher, student, stage, lambda step: data[step % 2], steps=8, lr=lr, out_dir=tmp_path)
    losses = state["losses"]
    assert state["done"] and len(losses) == 8 and state["tokens"] == 8 * 48
    assert losses[-2] + losses[-1] < 0.9 * (losses[0] + losses[1])
    assert all(p.requires_grad for p in student.parameters())  # flags restored


def test_interrupted_run_resumes_to_the_same_weights(teacher, tmp_path):
    data = batches(6)

    def run(out_dir, fail_at=None):
        student = build_student(teacher, [(1, 2)], 8, chunk_size=16, seed=3)

        def batch(step):
            if step == fail_at:
                raise RuntimeError("killed")
            return data[step]
        return student, distill(teacher, student, 3, batch, steps=6, lr=3e-3, out_dir=out_dir, save_every=2)

    whole, state = run(tmp_path / "whole")
    with pytest.raises(RuntimeError, match="killed"):
        run(tmp_path / "cut", fail_at=4)
    (tmp_path / "cut" / ".step-00000006.abc.tmp").mkdir()  # a save killed mid-write: removed
    assert sorted(p.name for p in (tmp_path / "cut").glob("step-*")) == ["step-00000002", "step-00000004"]
    resumed, again = run(tmp_path / "cut")
    assert again["resumed_from"] == 4 and again["losses"] == state["losses"]
    assert not list((tmp_path / "cut").glob(".step-*"))
    # Bitwise: every piece of state (weights, Adam moments, step counts, RNG) is restored exactly
    # and the CPU kernels are deterministic, so the remaining steps do the very same arithmetic.
    assert all(torch.equal(a, b) for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()))
    finished, last = run(tmp_path / "cut")  # a finished run reloads and does nothing
    assert last["resumed_from"] == 6 and torch.equal(finished.lm_head.weight, whole.lm_head.weight)
    with pytest.raises(ConfigError, match="delete the folder"):
        distill(teacher, build_student(teacher, [(1, 2)], 8, chunk_size=16), 3, data, 6, 1e-2, tmp_path / "cut")


def test_layer_shim_reproduces_the_teacher_in_both_hosts(teacher):
    x = batches(1)[0]
    ref = logits(teacher, x)
    host = copy.deepcopy(teacher)
    for i in range(L):
        with swap_layer(host, i, AttentionLayerShim(teacher.model.layers[i], teacher.model.rotary_emb)):
            assert torch.equal(logits(host, x), ref)
    # A Llamba with every layer swapped for the teacher's is the teacher (embeddings, norms and
    # head are the teacher's copies), padding included.
    llamba = to_llamba(build_student(teacher, [], 8, chunk_size=16))
    am = torch.ones_like(x)
    am[1, -5:] = 0
    shims = {i: AttentionLayerShim(layer, teacher.model.rotary_emb) for i, layer in enumerate(teacher.model.layers)}
    with replace_layers(llamba, shims):
        swapped = logits(llamba, x, attention_mask=am)
    ref = logits(teacher, x, attention_mask=am)
    assert torch.allclose(swapped[am.bool()], ref[am.bool()], atol=1e-6)
    with swap_teacher_layer(llamba, teacher, 1):
        assert not torch.equal(logits(llamba, x), logits(to_llamba(build_student(teacher, [], 8, chunk_size=16)), x))


def test_align_student_makes_a_resumable_micro_llamba(teacher, tmp_path):
    data = batches(3)
    first = align_student(teacher, data, tmp_path, steps=(3, 3), lr=(1e-2, 3e-3), state_size=8, chunk_size=16)
    assert isinstance(first, LlambaForCausalLM) and describe(first).family == "llamba"
    assert sorted(p.name for p in (tmp_path / "stage2").iterdir()) == ["step-00000003"]
    again = align_student(teacher, data, tmp_path, steps=(3, 3), lr=(1e-2, 3e-3), state_size=8, chunk_size=16)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))
    untrained = to_llamba(build_student(teacher, [], 8, chunk_size=16))
    assert not torch.equal(first.backbone.layers[0].mixer.D, untrained.backbone.layers[0].mixer.D)
    assert torch.equal(first.backbone.layers[0].mlp.up_proj.weight, teacher.model.layers[0].mlp.up_proj.weight)
    assert Path(tmp_path / "stage1").is_dir()
