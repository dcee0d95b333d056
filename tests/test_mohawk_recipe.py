"""goombalab/mohawk's distillation recipe, selectable: the adapter block, every parameter trained in
stage 2, AdamW weight decay with a warmup-stable-decay schedule, per-stage data mixes. The micro
defaults (sum, mixers only, no decay, constant lr, one mix) are what they were; docs/reproduction-notes.md."""
import math
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest
import torch
import yaml

from gna.config.schema import with_defaults
from gna.errors import ConfigError
from gna.hybrid.distillation import distill
from gna.hybrid.stage_settings import check_schedule, lr_factor, stage_options, stage_trainable
from gna.hybrid.student import build_student
from gna.hybrid.study.data import make_stream, stage_data
from gna.hybrid.study.web_stream import WebStream
from gna.models.tiny import build_tiny_model

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
MOHAWK_WSD = {"name": "wsd", "warmup": 0.1, "decay": 0.1, "warmup_start_lr": 0.0, "min_lr": 1e-8}


@pytest.fixture(scope="module")
def teacher():
    return build_tiny_model("llama", num_key_value_heads=2, vocab_size=64, num_hidden_layers=3).eval()


def ids(B=2, T=16, seed=0):
    return torch.randint(3, 64, (B, T), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------------- 1. the adapter block

def _std(x):  # torch.std's default, written out: Bessel-corrected
    return ((x - x.mean(-1, keepdim=True)) ** 2).sum(-1, keepdim=True).div(x.shape[-1] - 1).sqrt()


@pytest.mark.parametrize("adapter_init", ["identity", "default"])
def test_adapter_block_is_mohawks_formula(teacher, adapter_init):
    """mohawk DoubleBlockAdapter: h + (ssm + Linear(rescale(attn))) / 2, then the MLP; no heads: h + ssm."""
    student = build_student(teacher, [(0, 1), (0, 2)], 8, chunk_size=8, combine="adapter",
                            adapter_init=adapter_init, seed=5).eval()
    layer, bare = student.backbone.layers[0], student.backbone.layers[1]
    W, b = layer.adapter.out_proj.weight, layer.adapter.out_proj.bias
    if adapter_init == "identity":
        assert torch.equal(W, torch.eye(W.shape[0])) and not b.any()
    else:  # nn.Linear's own init: kaiming-uniform weight in +-1/sqrt(d), uniform bias, same seed same weights
        bound = 1 / math.sqrt(W.shape[1])
        assert W.abs().max() <= bound and b.abs().max() <= bound and b.abs().sum() > 0
        again = build_student(teacher, [(0, 1), (0, 2)], 8, chunk_size=8, combine="adapter", adapter_init="default",
                              seed=5)
        assert torch.equal(again.backbone.layers[0].adapter.out_proj.weight, W)
        with torch.no_grad():  # and the weight is not close to the identity
            assert (W - torch.eye(W.shape[0])).abs().max() > 0.5
    assert bare.adapter is None and bare.attn is None
    h = torch.randn(2, 12, student.config.d_model, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        u = layer.input_layernorm(h)
        ssm = layer.mixer(u)
        attn = layer.attn(u, *layer.attention_inputs(u))[0]
        rescaled = (attn - attn.mean(-1, keepdim=True)) / (_std(attn) + 1e-5) * (_std(ssm) + 1e-5) \
            + ssm.mean(-1, keepdim=True)
        mid = h + (ssm + rescaled @ W.T + b) / 2
        want = mid + layer.mlp(layer.post_attention_layernorm(mid))
        assert torch.allclose(layer(h), want, atol=1e-5)
        mid = h + bare.mixer(bare.input_layernorm(h))  # a layer without heads: the SSM alone, no / 2
        assert torch.allclose(bare(h), mid + bare.mlp(bare.post_attention_layernorm(mid)), atol=1e-6)
    with pytest.raises(ConfigError, match="adapter_init"):
        build_student(teacher, [], 8, adapter_init="zeros")


# --------------------------------------------------------------------------------- 2. stage 2's parameters

@pytest.mark.parametrize("which", [None, "mixers", "all"])
def test_stage2_trainable_mixers_or_all(teacher, tmp_path, which):
    student = build_student(teacher, [(0, 1), (2, 3)], 8, chunk_size=8, combine="adapter", seed=1)
    before = {n: p.detach().clone() for n, p in student.named_parameters()}
    opts = stage_options({"stage2_trainable": which, "weight_decay": 0.1} if which else {}, 2)
    distill(teacher, student, 2, [ids()], steps=1, lr=1e-3, out_dir=tmp_path, **opts)
    graded = {n for n, p in student.named_parameters() if p.grad is not None}
    moved = {n for n, p in student.named_parameters() if not torch.equal(p, before[n])}
    mixers = {n for n in before if any(k in n for k in (".mixer.", ".attn.", ".adapter."))}
    if which == "all":  # every layer parameter; embedding, final norm and head are not in the per-layer loss
        in_layers = {n for n in before if n.startswith("backbone.layers.")}
        assert graded == in_layers and moved == in_layers and in_layers > mixers
        assert any(".mlp." in n for n in graded) and any("layernorm" in n for n in graded)
        assert torch.equal(student.backbone.embedding.weight, before["backbone.embedding.weight"])  # no grad: no decay
    else:  # the default: mixers, kept heads and adapter only
        assert graded == mixers and moved == mixers
    assert all(p.requires_grad for p in student.parameters())  # flags restored
    with pytest.raises(ConfigError, match="stage 3"):
        stage_trainable(3, "all")
    with pytest.raises(ConfigError, match="stage2_trainable"):
        stage_trainable(2, "some")
    assert "trainable" not in stage_options({"stage2_trainable": "all"}, 3)
    assert "trainable" not in stage_options({"stage2_trainable": "all"}, 1)


@pytest.mark.parametrize("which", [None, "all"])
def test_stage1_trainable_is_every_parameter_with_a_gradient_as_mohawk(teacher, tmp_path, which):
    """mohawk marks every parameter trainable in stage 1: what the matrix loss reaches trains, the
    mixers and each layer's input_layernorm (the matrix is computed on its output); the default
    trains the mixers only."""
    student = build_student(teacher, [(0, 1)], 8, chunk_size=8, seed=1)
    before = {n: p.detach().clone() for n, p in student.named_parameters()}
    opts = stage_options({"stage1_trainable": which, "weight_decay": 0.1} if which else {}, 1)
    distill(teacher, student, 1, [ids()], steps=1, lr=1e-3, out_dir=tmp_path, **opts)
    moved = {n for n, p in student.named_parameters() if not torch.equal(p, before[n])}
    mixers = {n for n in before if ".mixer." in n}
    norms = {n for n in before if ".input_layernorm." in n}
    assert norms and mixers
    if which == "all":
        assert moved == {n for n, p in student.named_parameters() if p.grad is not None}
        assert norms <= moved and mixers & moved and not any(".mlp." in n or "embedding" in n for n in moved)
    else:
        assert moved <= mixers and not norms & moved


# --------------------------------------------------------------------------------- 3. optimizer

def test_wsd_curve_is_mohawks():
    """utils/wsd_scheduler.py: linear warm-up from 0 (step 0 has lr 0), flat, linear decay to min_lr."""
    lr, total = 1e-4, 100
    f = [lr_factor(s, total, lr, MOHAWK_WSD) * lr for s in range(total)]
    assert f[0] == 0 and f[5] == pytest.approx(lr / 2) and f[9] == pytest.approx(0.9 * lr)
    assert all(x == lr for x in f[10:91])  # warm-up over int(0.1 * 100) = 10 steps; decay the last 10
    diffs = [f[s] - f[s + 1] for s in range(90, 99)]
    assert all(d == pytest.approx((lr - 1e-8) / 10) for d in diffs)  # linear decay
    assert f[99] == pytest.approx(0.1 * (lr - 1e-8) + 1e-8)
    assert lr_factor(total, total, lr, MOHAWK_WSD) * lr == pytest.approx(1e-8)
    # cosine (pl_bolts LinearWarmupCosineAnnealingLR): lr reached at warmup - 1, then a half cosine
    cos = {"name": "cosine", "warmup": 10, "min_lr": 0.0}
    c = [lr_factor(s, total, 1.0, cos) for s in range(total + 1)]
    assert c[0] == 0 and c[9] == 1 and c[10] == 1 and c[55] == pytest.approx(0.5) and c[100] == pytest.approx(0)
    assert all(c[s] >= c[s + 1] for s in range(10, total))
    constant = [lr_factor(s, total, 1.0, {"name": "constant", "warmup": 0.1}) for s in range(total)]
    assert constant[5] == 0.5 and set(constant[10:]) == {1.0}
    for bad in ({"name": "wsd", "warmup": 0.5, "decay": 0.5}, {"name": "step"}, {"name": "wsd", "cycles": 2}):
        with pytest.raises(ConfigError):
            check_schedule(bad, total)


def test_weight_decay_and_schedule_reach_adamw(teacher, tmp_path, monkeypatch):
    seen = []
    step = torch.optim.AdamW.step

    def spy(self, *a, **k):
        seen.append([(g["lr"], g["weight_decay"], len(g["params"])) for g in self.param_groups])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    student = build_student(teacher, [(0, 1)], 8, chunk_size=8, combine="adapter", seed=1)
    data = [ids(seed=s) for s in range(2)]
    opts = stage_options({"weight_decay": 0.1, "schedule": MOHAWK_WSD, "grad_clip": 0}, 3)
    assert opts["grad_clip"] is None
    state = distill(teacher, student, 3, lambda s: data[s % 2], steps=20, lr=1e-3, out_dir=tmp_path / "a", **opts)
    n = sum(1 for _ in student.parameters())
    assert [g[0][1:] for g in seen] == [(0.1, n)] * 20  # one group: every parameter decays (mohawk)
    assert [g[0][0] for g in seen] == pytest.approx([lr_factor(s, 20, 1e-3, MOHAWK_WSD) * 1e-3 for s in range(20)])
    assert state["fingerprint"]["schedule"] == MOHAWK_WSD and state["fingerprint"]["weight_decay"] == 0.1
    # no_decay (not mohawk's): those parameters in a second group without decay
    seen.clear()
    student = build_student(teacher, [(0, 1)], 8, chunk_size=8, seed=1)
    pats = [r"layernorm", r"\.bias$", r"A_log", r"\.D$"]
    distill(teacher, student, 3, data, steps=1, lr=1e-3, out_dir=tmp_path / "b", weight_decay=0.1, no_decay=pats)
    names = [nm for nm, _ in student.named_parameters()]
    skipped = sum(1 for nm in names if any(__import__("re").search(p, nm) for p in pats))
    assert seen[0] == [(1e-3, 0.1, len(names) - skipped), (1e-3, 0.0, skipped)] and skipped > 0
    # a checkpoint of another schedule is not resumed
    with pytest.raises(ConfigError, match="delete the folder"):
        distill(teacher, build_student(teacher, [(0, 1)], 8, chunk_size=8, combine="adapter", seed=1), 3, data,
                steps=20, lr=1e-3, out_dir=tmp_path / "a", weight_decay=0.1, grad_clip=None,
                schedule={**MOHAWK_WSD, "decay": 0.2})


# --------------------------------------------------------------------------------- 4. data per stage

MOHAWK_DATA = {
    "source": "web", "seq_len": 2048, "batch_size": 32, "mixing": "round_robin",
    "sources": [{"path": "fineweb-edu", "weight": 1}, {"path": "finemath", "weight": 1}],
    "by_stage": [{"batch_size": 64, "sources": [{"path": "fineweb-edu", "weight": 1}]}, {"batch_size": 128},
                 {"batch_size": 128}]}


@pytest.fixture
def fake_hub(monkeypatch):
    """datasets.load_dataset answering from memory: documents "<path>|<i>"; nothing touches the network."""
    import datasets

    def load_dataset(path, name=None, split="train", streaming=False):
        assert streaming
        return datasets.Dataset.from_dict({"text": [f"{path}|{i}" for i in range(3000)]}).to_iterable_dataset()

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)


def origins(data, n=600, seed=0):
    stream = make_stream(data, None, None, seed)
    assert isinstance(stream, WebStream)
    return [doc.split("|")[0] for doc in islice(stream._mixed(), n)]  # before the held-out split


def test_each_stage_draws_its_own_mix(fake_hub):
    one, two, three = (stage_data(MOHAWK_DATA, s) for s in (1, 2, 3))
    assert (one["batch_size"], two["batch_size"], three["batch_size"]) == (64, 128, 128)
    assert "by_stage" not in one and set(origins(one)) == {"fineweb-edu"}
    for cfg in (two, three):  # round robin 1:1: fineweb-edu, finemath, fineweb-edu, ... exactly
        o = origins(cfg)
        assert o[:4] == ["fineweb-edu", "finemath"] * 2 and Counter(o) == {"fineweb-edu": 300, "finemath": 300}
    ratio = {**three, "sources": [{"path": "fineweb-edu", "weight": 9}, {"path": "finemath", "weight": 1}]}
    assert Counter(origins(ratio, 500)) == {"fineweb-edu": 450, "finemath": 50}
    sampled = {**three, "mixing": "sample",
               "sources": [{"path": "fineweb-edu", "weight": 0.75}, {"path": "finemath", "weight": 0.25}]}
    share = Counter(origins(sampled, 2000))["fineweb-edu"] / 2000
    assert 0.72 < share < 0.78  # drawn at random in proportion to the weights (the default mixing)
    with pytest.raises(ConfigError, match="whole-number"):
        make_stream({**three, "sources": [{"path": "a", "weight": 0.5}]}, None, None)
    with pytest.raises(ConfigError, match="3"):
        stage_data({**MOHAWK_DATA, "by_stage": [{}]}, 1)


def test_micro_data_without_by_stage_is_unchanged():
    micro = {"source": "micro", "batch_size": 16, "corpus": {"max_len": 160}}
    assert all(stage_data(micro, s) == micro for s in (1, 2, 3))
    per = {**micro, "by_stage": [None, {"corpus": {"max_len": 96}}, {"batch_size": 8}]}
    assert stage_data(per, 1) == micro and stage_data(per, 2)["corpus"] == {"max_len": 96}
    assert stage_data(per, 3)["batch_size"] == 8


def test_paper_preset_selects_mohawks_recipe_and_micro_keeps_its_own():
    """The workflow's per-stage settings (hybrid.smk's DISTILL_STAGE) for both configs."""
    src = (ROOT / "workflow/rules/hybrid.smk").read_text()
    own = (ROOT / "workflow/rules/helpers/hybrid.smk").read_text()   # the helpers the block calls
    helpers = own[own.index("def _distill_at"):]
    block = helpers + "\n" + src[src.index("DISTILL_STAGE = {"):src.index("HYBRID_OUTPUTS")]
    stages = {}
    for name, path in (("paper", "workflow/configs/paper.yaml"), ("micro", "config.yaml")):
        cfg = with_defaults(yaml.safe_load((ROOT / path).read_text()))   # as the workflow validates it
        ns = dict(DISTILL=cfg["experiments"]["hybrid_distillation"], config=cfg,
                  STAGE_NAMES={1: "matrices", 2: "hidden_states", 3: "end_to_end"})
        exec(block, ns)
        stages[name] = ns["DISTILL_STAGE"]
    paper = stages["paper"]
    assert all(paper[s]["weight_decay"] == 0.1 and paper[s]["schedule"]["name"] == "wsd" for s in (1, 2, 3))
    assert paper[2]["stage2_trainable"] == "all" and paper[2]["adapter_init"] == "default"
    assert paper[2]["combine"] == "adapter" and "stage2_trainable" not in paper[3]
    assert paper[1]["stage1_trainable"] == "all" and "stage1_trainable" not in paper[2]
    assert [len(paper[s]["data"]["sources"]) for s in (1, 2, 3)] == [1, 2, 2]
    assert [paper[s]["data"]["batch_size"] for s in (1, 2, 3)] == [64, 128, 128]
    new = {"weight_decay", "schedule", "grad_clip", "no_decay", "stage1_trainable", "stage2_trainable",
           "adapter_init"}
    for s, run in stages["micro"].items():
        assert not new & set(run) and "by_stage" not in run["data"] and stage_options(run, s) == {}
