"""The paper's experiments as its code ran them: each test pins one choice of the official code."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from gna.experiments.head_selection import keeping_plan, mmlu_heads, named_role_heads, role_heads
from gna.interventions import last_positions, mask_last_row
from gna.models import describe
from gna.models.tiny import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------- 1. Zamba2's last-row mask

def _zamba2(**kw):
    # the per-invocation LoRA adapters on: the shared block differs per invocation
    model = build_tiny_model("zamba2", layers=4, use_shared_attention_adapter=True, adapter_rank=4,
                             attn_implementation="eager", **kw)
    return model.eval()


def _official_eager(rows):
    """goombalab/Gather-and-Aggregate models/modeling_zamba2.py: softmax, then
    attn_weights[last_indices[:, 0], :, last_indices[:, 1]] = 0, for every head."""
    from transformers.models.zamba2.modeling_zamba2 import repeat_kv

    def eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        key_states = repeat_kv(key, module.num_key_value_groups)
        value_states = repeat_kv(value, module.num_key_value_groups)
        w = torch.matmul(query, key_states.transpose(2, 3)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
        w[rows[:, 0], :, rows[:, 1]] = 0.0
        return torch.matmul(w, value_states).transpose(1, 2).contiguous(), w
    return eager


def test_last_row_mask_equals_the_official_softmax_row_zeroing_on_zamba2(monkeypatch):
    import transformers.models.zamba2.modeling_zamba2 as z2
    torch.manual_seed(1)
    model = _zamba2()
    ids = torch.randint(3, 100, (3, 9))
    ids[1, 6:] = 0          # right padding, as lm-eval pads log-likelihood batches
    ids[2, 4:] = 0
    with torch.no_grad():
        plain = model(ids).logits
        with mask_last_row(model, "all"):
            ours = model(ids).logits
        official_rows = torch.stack([torch.arange(3), (ids != 0).sum(1) - 1], dim=1)
        monkeypatch.setattr(z2, "eager_attention_forward", _official_eager(official_rows))
        official = model(ids).logits
    assert torch.allclose(ours, official, atol=1e-6), (ours - official).abs().max()
    assert not torch.allclose(ours[0, -1], plain[0, -1], atol=1e-4)   # the answer position changed
    last = last_positions(ids)
    assert last.tolist() == [8, 5, 3]
    # cached generation: the mask covers past tokens, the current input is the last one
    assert last_positions(None, torch.ones(3, 9, dtype=torch.long), length=1).tolist() == [0, 0, 0]


def test_last_row_mask_works_through_cached_generation():
    model = _zamba2()
    ids = torch.randint(3, 100, (2, 7))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0      # left padding, as lm-eval pads generation batches: the mask goes in
    seen = []
    hook = model.register_forward_pre_hook(lambda m, a, k: seen.append(k.get("attention_mask")), with_kwargs=True)
    with torch.no_grad(), mask_last_row(model, "all"):
        out = model.generate(ids, attention_mask=mask, max_new_tokens=3, do_sample=False)
    hook.remove()
    assert out.shape == (2, 10) and seen[-1] is not None and seen[-1].shape[1] > 1


def test_last_row_mask_leaves_earlier_positions_bit_identical_and_the_model_unchanged():
    model = _zamba2()
    desc = describe(model)
    attention = [m for m in desc.mixers if m.kind == "attention"]
    assert len(attention) == 2 and attention[0].invocation is not attention[1].invocation
    ids = torch.randint(3, 100, (2, 10))
    outs = {}

    def grab(name):
        def hook(module, args, output):
            outs.setdefault(name, []).append(output.detach().clone())
        return hook

    before = {k: v.clone() for k, v in model.state_dict().items()}
    target = attention[1]          # one head of the second invocation only
    handle = target.invocation.register_forward_hook(grab("layer"))
    with torch.no_grad():
        model(ids)
        with mask_last_row(model, [(target.layer, 2, "attention")]):
            model(ids)
    handle.remove()
    plain, masked = (o[0] if isinstance(o, tuple) else o for o in outs["layer"])
    assert torch.equal(plain[:, :-1], masked[:, :-1])           # earlier positions: bit-identical
    assert not torch.equal(plain[:, -1], masked[:, -1])
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    with torch.no_grad():   # and invocation 1's mask does not touch invocation 0's output
        first = []
        h = attention[0].invocation.register_forward_hook(lambda m, a, o: first.append(o[0] if isinstance(o, tuple)
                                                                                       else o))
        model(ids)
        with mask_last_row(model, [(target.layer, 2, "attention")]):
            model(ids)
        h.remove()
    assert torch.equal(first[0], first[1])


def test_mask_last_row_is_a_named_intervention_beside_whole_head_ablation():
    from gna.interventions.vocabulary import applied, label
    assert label([{"mask_last_row": "all"}]) == "last_row=all"
    assert label([{"mask_last_row": [[1, 0, "attention"]]}, {"ablate_heads": [[1, 0, "attention"]]}]) == \
        "last_row=L1H0+ablate=L1H0"
    model = _zamba2()
    ids = torch.randint(3, 100, (1, 6))
    with torch.no_grad():
        plain = model(ids).logits
        with applied(model, [{"mask_last_row": "all"}]):
            row = model(ids).logits
        with applied(model, [{"ablate_heads": [list(h) for h in describe(model).heads() if h[2] == "attention"]}]):
            whole = model(ids).logits
    assert torch.equal(row[:, :-1], plain[:, :-1]) and not torch.equal(whole[:, :-1], plain[:, :-1])


# --------------------------------------------------------------------- 3-4. critical layers, Table 1 heads

# (the critical layers' rule: tests/test_critical_layers.py)


def test_table1_heads_are_the_mmlu_heads_or_the_named_ones():
    scores = pd.DataFrame({"layer": [3, 3, 3, 4, 4, 4], "head": [0, 1, 2, 0, 1, 2],
                           "mmlu": [0.8, 0.4, 0.7, 0.9, 0.85, 0.3]})
    assert mmlu_heads(scores, 3, 1) == [1] and mmlu_heads(scores, 4, 2) == [2, 1]
    roles = {"gather": [[3, 1, "attention"]], "aggregate": [[4, 2, "attention"]]}
    keep, kept = keeping_plan(roles, "gather_only")
    assert kept == {"L3": "1", "L4": "none"}
    assert keep == [{"keep_heads": [{"layer": 3, "heads": [1], "kind": "attention"},
                                    {"layer": 4, "heads": [], "kind": "attention"}]}]
    named = named_role_heads({"gather": [[16, 10]], "aggregate": [[17, 3], [17, 9]]})
    assert keeping_plan(named, "both")[1] == {"L16": "10", "L17": "3/9"}
    ga = pd.DataFrame({"layer": [0, 1], "head": [1, 2], "kind": ["attention"] * 2, "rank": [1, 2],
                       "role": ["gather", "aggregate"]})
    assert role_heads(ga, "aggregate") == [[1, 2, "attention"]]
    assert role_heads(ga, "aggregate", named) == [[17, 3], [17, 9]]


# --------------------------------------------------------------------- 6. lm-eval settings

def test_fewshot_is_explicit_per_task_and_filters_stay_apart(monkeypatch):
    import lm_eval

    from gna.evaluation import lm_eval_bridge as ev
    calls = []

    def fake(model, tasks, num_fewshot=None, **kw):
        calls.append((tuple(t if isinstance(t, str) else t["task"] for t in tasks), num_fewshot))
        return {"results": {t: {"exact_match,strict-match": 0.4, "exact_match,flexible-extract": 0.6,
                                "exact_match_stderr,strict-match": 0.01, "alias": t} for t in tasks}}

    monkeypatch.setattr(lm_eval, "simple_evaluate", fake)
    class StubLM:
        max_length = 2048

        def __init__(self, **kw):
            pass

        def tok_encode(self, text):
            return [5]

    monkeypatch.setattr("lm_eval.models.huggingface.HFLM", StubLM)

    class Suite:
        def resolve(self, names):
            return names, None

    res = ev.evaluate(torch.nn.Linear(1, 1), None, ["gsm8k", "bbh"], Suite(), num_fewshot={"bbh": 3})
    assert sorted(calls) == [(("bbh",), 3), (("gsm8k",), 0)]      # never left to lm-eval's default
    assert res["gsm8k"] == {("exact_match", "strict-match"): 0.4, ("exact_match", "flexible-extract"): 0.6}
    rows = ev.tidy(res, {"bbh": 3}, model="m")
    g = rows[rows.task == "gsm8k"].set_index("filter").value
    assert g.to_dict() == {"strict-match": 0.4, "flexible-extract": 0.6}
    assert set(rows[rows.task == "bbh"].num_fewshot) == {3} and set(rows[rows.task == "gsm8k"].num_fewshot) == {0}
    from gna.report.heads import role_scores
    scores = role_scores(rows.assign(k=0), {"gsm8k": ["gsm8k"]}, "k")
    assert scores.loc[0, "gsm8k"] == pytest.approx(40.0) and scores.loc[0, "gsm8k_filter"] == "strict-match"


# --------------------------------------------------------------------- 7. HF Mamba-2 masking stays local

def test_masking_one_mamba2_head_leaves_the_other_heads_out_proj_input_unchanged():
    from gna.interventions.masked_mixing import masked_mixers
    torch.manual_seed(0)
    model = build_tiny_model("mamba2", layers=2)        # n_groups = 1: the gated norm spans all heads
    mixer = describe(model).mixer(0)
    H, D = mixer.n_heads, mixer.head_dim
    ids = torch.randint(3, 100, (2, 12))
    seen = []
    hook = mixer.out_proj.register_forward_pre_hook(lambda m, a: seen.append(a[0].detach().clone()))
    with torch.no_grad():
        plain = model(ids, use_cache=False).logits
        with masked_mixers(model, {0: torch.ones(1, H, 12, 12)}):
            ones = model(ids, use_cache=False).logits
        mask = torch.ones(1, H, 12, 12)
        mask[0, 3] = 0
        with masked_mixers(model, {0: mask}):
            model(ids, use_cache=False)
    hook.remove()
    assert torch.allclose(ones, plain, atol=1e-5)
    # each masked forward calls out_proj twice: the module's own pass, then the hook's masked one
    assert len(seen) == 5
    base, masked = (x.unflatten(-1, (H, D)) for x in (seen[2], seen[4]))
    others = [h for h in range(H) if h != 3]
    assert torch.allclose(masked[..., others, :], base[..., others, :], atol=1e-6)
    assert not torch.allclose(masked[..., 3, :], base[..., 3, :], atol=1e-4)


# --------------------------------------------------------------------- 2, 8, 9, 10: the paper preset's DAG

@pytest.fixture(scope="module")
def paper_dag(tmp_path_factory):
    work = tmp_path_factory.mktemp("paperdag")
    dry = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(work),
                          "--configfile", str(ROOT / "workflow/configs/paper.yaml"), "-n"], capture_output=True,
                         text=True, cwd=ROOT)
    assert dry.returncode == 0, dry.stderr[-3000:]
    return dry.stdout


def _jobs(dry: str, rule: str) -> list[str]:
    blocks = dry.split("\nrule ")
    return [b for b in blocks if b.startswith(f"{rule}:")]


def test_paper_preset_is_the_papers_experiment(paper_dag):
    cfg = yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text())
    assert cfg["models"]["llamba-3b"]["n_heads_total"] == 28 * 32                       # 10
    assert cfg["kv_probe"]["separator"] == "" and cfg["experiments"]["hybrid_distillation"]["kv_separator"] == " "
    assert cfg["eval"]["num_fewshot"] == 0
    assert cfg["experiments"]["head_keeping"]["named_heads"]["llama-8b"] == {"gather": [[16, 22]],
                                                                              "aggregate": [[17, 24]]}
    assert cfg["experiments"]["ssm_masking"]["named_heads"]["llamba-8b"]["aggregate"] == [[17, 3], [17, 9]]
    assert cfg["scan"]["classify_top"] >= 15
    # 8: the G&A scan ranks on "...is42", the distilled teacher on "is 42"
    scans = _jobs(paper_dag, "head_scan")
    llama1b = {b.split("input: ")[1].split("\n")[0] for b in scans if "model=llama-1b" in b}
    assert any("results/probes/kv-paper-n20-s0-nosep" in i for i in llama1b)
    assert any("results/probes/kv-paper-n20-s0-space" in i for i in llama1b)
    # 9: the hybrids' KV retrieval is scored on prompts of another seed than the ranking's
    for b in _jobs(paper_dag, "evaluate_hybrid"):
        assert "kv-paper-n20-s1-space" in b and "-s0-" not in b.split("input: ")[1].split("\n")[0]
    # 2: Zamba2's hybrid-attention k = 0 is the top-k table's k = 0, evaluated once
    zamba = [b for b in _jobs(paper_dag, "hybrid_attention") if "zamba2" in b]
    assert zamba and not any("k0.csv" in b for b in zamba)
    assert all("mode=last_row" in b for b in zamba)


def test_evaluate_skips_lm_evals_environment_report_and_changes_no_number():
    """The environment report at the end of simple_evaluate (~1.5 s of subprocesses per job) is
    switched off during gna.evaluation.lm_eval_bridge.evaluate only; the metrics equal a plain simple_evaluate's."""
    import lm_eval.evaluator as ev
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate
    from gna.models import load_model

    model, tok = load_model({"path": str(ROOT / "data/models/micro-llama")})
    suite = TaskSuite(str(ROOT / "data/micro/tasks"))
    before = ev.add_env_info, ev.get_git_commit_hash
    ours = evaluate(model, tok, ["micro_mmlu"], suite, limit=16, batch_size=8)
    assert (ev.add_env_info, ev.get_git_commit_hash) == before  # restored
    resolved, manager = suite.resolve(["micro_mmlu"])
    plain = simple_evaluate(model=HFLM(pretrained=model, tokenizer=tok, batch_size=8), tasks=resolved,
                            task_manager=manager, limit=16, bootstrap_iters=0, log_samples=False, num_fewshot=0)
    assert "pretty_env_info" in plain  # what the plain call adds, and ours skips
    assert ours["micro_mmlu"][("acc", "none")] == plain["results"]["micro_mmlu"]["acc,none"]
