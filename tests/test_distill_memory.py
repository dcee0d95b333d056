"""Distillation's memory knobs: micro-batches with gradient accumulation, stage 1's teacher attention one
layer at a time, stage 3's KL over the vocabulary in chunks of token positions. None of them may change
the loss or the gradients beyond rounding."""
import tempfile
import weakref

import pytest
import torch

from gna.errors import ConfigError
from gna.hybrid.distillation import distill
from gna.hybrid.student import build_student
from gna.hybrid.stage_losses import STAGE_LOSSES
from gna.models.tiny import build_tiny_model

torch.set_num_threads(1)
LAYERS = 3


@pytest.fixture(scope="module")
def teacher():
    return build_tiny_model("llama", num_key_value_heads=2, vocab_size=64, num_hidden_layers=LAYERS).eval()


def batch(B=5, T=20, seed=0):
    """ids (B, T) with a right-padded and a left-padded row (the means' denominators are not B*T)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 64, (B, T), generator=g)
    am = torch.ones_like(ids)
    am[1, -6:] = 0
    am[3, :4] = 0
    return ids, am


def student_for(teacher, stage):
    student = build_student(teacher, [(0, 1), (2, 3)] if stage > 1 else [], 8, chunk_size=8, seed=1).train()
    if stage == 3:  # a student that differs from the teacher everywhere, so every gradient is non-trivial
        with torch.no_grad():
            for p in student.parameters():
                p.add_(torch.randn_like(p) * 0.02)
    return student


def loss_and_grads(teacher, stage, ids, am, **memory):
    student = student_for(teacher, stage)
    loss = STAGE_LOSSES[stage](teacher, student, ids, am, **memory)
    return float(loss), {n: p.grad.clone() for n, p in student.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("stage,memory", [
    (1, dict(micro_batch_size=2)), (1, dict(micro_batch_size=1)),
    (2, dict(micro_batch_size=2)), (2, dict(micro_batch_size=3)),
    (3, dict(micro_batch_size=2)), (3, dict(vocab_chunk=7)), (3, dict(micro_batch_size=3, vocab_chunk=16)),
    (3, dict(vocab_chunk=1000))])
def test_accumulated_and_chunked_losses_equal_the_whole_batch(teacher, stage, memory):
    ids, am = batch()
    ref_loss, ref = loss_and_grads(teacher, stage, ids, am)
    loss, grads = loss_and_grads(teacher, stage, ids, am, **memory)
    assert sorted(grads) == sorted(ref) and len(ref) > 0
    assert abs(loss - ref_loss) < 1e-5 * max(1.0, abs(ref_loss))
    for name, g in ref.items():
        assert g.abs().max() > 0, name
        assert (grads[name] - g).abs().max() < 1e-5 * max(1.0, g.abs().max().item()), name


def test_stage1_holds_one_teacher_attention_at_a_time(teacher):
    """Each layer's attention matrix is dead before the next layer's exists (weak references),
    and each is consumed (its mixer aligned) before the next teacher layer runs."""
    ids, am = batch()
    student = student_for(teacher, 1)
    alive_at_creation, order = [], []
    refs = []

    def watch(i):
        def hook(module, args, out):
            alive_at_creation.append(sum(r() is not None for r in refs))
            refs.append(weakref.ref(out[1]))
            order.append(("teacher", i))
        return hook

    handles = [layer.self_attn.register_forward_hook(watch(i)) for i, layer in enumerate(teacher.model.layers)]
    handles += [layer.mixer.register_forward_hook(lambda m, a, o, i=i: order.append(("student", i)))
                for i, layer in enumerate(student.backbone.layers)]
    # mixing_matrix, not forward, is what stage 1 calls: record it too
    originals = [layer.mixer.mixing_matrix for layer in student.backbone.layers]
    for i, layer in enumerate(student.backbone.layers):
        layer.mixer.mixing_matrix = (lambda f, i: lambda *a, **k: (order.append(("student", i)), f(*a, **k))[1])(
            originals[i], i)
    try:
        STAGE_LOSSES[1](teacher, student, ids, am, micro_batch_size=2)
    finally:
        for h in handles:
            h.remove()
        for layer in student.backbone.layers:
            del layer.mixer.mixing_matrix
    assert len(refs) == 3 * LAYERS  # three micro-batches of the 5 rows, every layer each
    assert alive_at_creation == [0] * len(refs) and all(r() is None for r in refs)
    assert order == [(who, i) for _ in range(3) for i in range(LAYERS) for who in ("teacher", "student")]


def test_stage3_chunks_never_make_full_logits(teacher):
    """With vocab_chunk, the student's LM head only ever sees that many positions at once."""
    ids, am = batch()
    student = student_for(teacher, 3)
    rows = []
    for head in (student.lm_head, teacher.lm_head):
        head.register_forward_hook(lambda m, a, o: rows.append(a[0].shape[:-1]))
    try:
        STAGE_LOSSES[3](teacher, student, ids, am, micro_batch_size=2, vocab_chunk=16)
    finally:
        student.lm_head._forward_hooks.clear()
        teacher.lm_head._forward_hooks.clear()
    # 3 micro-batches of 2, 2, 1 rows x 20 positions: chunks of 16 + 16 + 8 and 16 + 4, both heads
    assert [r[0] for r in rows] == [16, 16, 16, 16, 8, 8] * 2 + [16, 16, 4, 4]
    assert all(len(r) == 1 for r in rows)


def test_distill_passes_the_knobs_and_keeps_its_checkpoints_compatible(teacher, tmp_path):
    ids, am = batch(B=4)
    data = [{"input_ids": ids, "attention_mask": am}] * 2
    calls = []
    handle = teacher.model.register_forward_pre_hook(lambda m, a, k: calls.append(1), with_kwargs=True)
    try:
        whole = distill(teacher, student_for(teacher, 3), 3, data, steps=1, lr=1e-3, out_dir=tmp_path / "a")
        n_whole = len(calls)
        micro = distill(teacher, student_for(teacher, 3), 3, data, steps=1, lr=1e-3, out_dir=tmp_path / "b",
                        micro_batch_size=2, vocab_chunk=8)
    finally:
        handle.remove()
    assert n_whole == 1 and len(calls) - n_whole == 2  # one teacher pass per micro-batch
    assert abs(whole["losses"][0] - micro["losses"][0]) < 1e-6
    # the knobs are not in the fingerprint: a run that ran out of memory resumes with smaller ones
    again = distill(teacher, student_for(teacher, 3), 3, data, steps=2, lr=1e-3, out_dir=tmp_path / "b",
                    micro_batch_size=1)
    assert again["resumed_from"] == 1 and again["step"] == 2
    for bad in (dict(micro_batch_size=0), dict(vocab_chunk=-1), dict(micro_batch_size=2.5)):
        with pytest.raises(ConfigError, match="positive integer"):
            with tempfile.TemporaryDirectory() as d:
                distill(teacher, student_for(teacher, 3), 3, data, steps=1, lr=1e-3, out_dir=d, **bad)
