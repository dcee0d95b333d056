"""The hybrid experiments' functions on tiny models: SSM masking, task export, distillation data and
checkpoints, the hybrid tables and their findings. (The rules end to end: test_pipeline.py.)"""
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from gna.errors import ConfigError, ProbeError
from gna.evaluation.lm_eval_bridge import TaskSuite
from gna.experiments.ssm_masking import export_mc_examples, masked_accuracy, masking_rows, ssm_ga_heads
from gna.hybrid.study.data import checkpoint_dir, heldout_perplexity, make_stream, seq_len_of, stage_steps
from gna.hybrid.study.web_stream import WebStream
from gna.micro.tasks import micro_vocabulary
from gna.micro.tokenizer import word_level_tokenizer
from gna.micro.world import WorldConfig
from gna.models import describe
from gna.models.tiny import build_tiny_model
from gna.probes.scoring import encode, score
from gna.report import findings, hybrid_distillation
from gna.report.findings import hybrid_attention, layer_swap, ssm_masking
from gna.report.findings import hybrid_distillation as distillation_findings

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "data/micro/tasks"


@pytest.fixture(scope="module")
def tok():
    return word_level_tokenizer(micro_vocabulary(WorldConfig()))


def rows(task, n):
    with open(TASKS / f"{task}.jsonl") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def ga_frame(entries):
    return pd.DataFrame([dict(layer=l, head=h, kind=k, rank=r, role=role) for l, h, k, r, role in entries])


# --------------------------------------------------------------------------------- masking

def test_ssm_ga_heads_prefers_classified_heads_and_says_when_it_falls_back():
    ga = ga_frame([(0, 1, "attention", 1, "gather"), (1, 3, "mamba2", 2, "-"), (0, 5, "mamba2", 3, "gather"),
                   (1, 0, "mamba2", 4, "aggregate")])
    assert ssm_ga_heads(ga) == ({"gather": [[0, 5, "mamba2"]], "aggregate": [[1, 0, "mamba2"]]}, "classified")
    none = ga_frame([(1, 3, "mamba2", 1, "-"), (0, 5, "mamba2", 2, "-"), (0, 2, "mamba2", 3, "-")])
    heads, how = ssm_ga_heads(none)  # earliest layer's top head gathers, latest layer's aggregates
    assert heads == {"gather": [[0, 5, "mamba2"]], "aggregate": [[1, 3, "mamba2"]]} and how == "fallback:gather+aggregate"
    one_layer = ga_frame([(2, 3, "discrete-mamba2", 1, "aggregate"), (2, 1, "discrete-mamba2", 2, "-")])
    assert ssm_ga_heads(one_layer) == ({"gather": [[2, 1, "discrete-mamba2"]], "aggregate": [[2, 3, "discrete-mamba2"]]},
                                       "fallback:gather")
    with pytest.raises(ProbeError, match="no maskable SSM head"):
        ssm_ga_heads(ga_frame([(0, 1, "attention", 1, "gather")]))


@pytest.mark.parametrize("family,kind", [("mamba2", "mamba2"), ("llamba", "discrete-mamba2")])
def test_masked_scoring_is_exact_unmasked_and_changes_scores_when_masked(tok, family, kind):
    model = build_tiny_model(family, vocab_size=len(tok))
    layers = describe(model).n_layers
    heads = {"gather": [[0, 1, kind]], "aggregate": [[layers - 1, 2, kind]]}
    mmlu = rows("micro_mmlu", 12)
    ref = score(model, encode(mmlu, tok), batch_size=5)
    none = masked_accuracy(model, tok, mmlu, heads, "none", batch_size=5)
    assert none["acc"] == ref.accuracy and none["with_pattern"] == 12
    assert torch.allclose(none["logprobs"], ref.logprobs, atol=1e-5)
    full = masked_accuracy(model, tok, mmlu, heads, "full", batch_size=5)
    pattern = masked_accuracy(model, tok, mmlu, heads, "pattern", batch_size=5)
    # (random tiny models: the differences are small, but there)
    assert not torch.equal(full["logprobs"], none["logprobs"])
    assert not torch.equal(pattern["logprobs"], full["logprobs"])
    # knowledge prompts have no choice lines: the pattern condition masks the heads fully there
    cloze = rows("micro_knowledge_statement", 6)  # multi-token choices: one row per choice
    a = masked_accuracy(model, tok, cloze, heads, "pattern", batch_size=8)
    b = masked_accuracy(model, tok, cloze, heads, "full", batch_size=8)
    assert a["with_pattern"] == 0 and torch.equal(a["logprobs"], b["logprobs"])
    kept = []
    out = masking_rows(model, tok, {"micro_mmlu": mmlu}, heads, "pattern", 6, {"model": "m"}, answers=kept)
    assert list(out.columns[:4]) == ["model", "condition", "task", "metric"] and out["heads"][0] == \
        f"gather=L0H1 aggregate=L{layers - 1}H2"
    # each question's answer kept, for the findings to pair the modes: its mean is the row's accuracy
    (answers,) = kept
    assert len(answers) == 12 and set(answers.condition) == {"pattern"} and answers.value.mean() == out.value[0]
    assert list(answers.chosen) == pattern["logprobs"].argmax(-1).tolist()


def test_export_reads_the_rows_lm_eval_scores():
    suite = TaskSuite(str(TASKS))
    got = export_mc_examples("micro_mmlu", suite, limit=5)
    assert [{k: r[k] for k in ("prompt", "choices", "answer")} for r in got] == \
        [{k: r[k] for k in ("prompt", "choices", "answer")} for r in rows("micro_mmlu", 5)]
    assert export_mc_examples("micro_knowledge_cloze", suite, limit=2)[1]["answer"] == rows("micro_knowledge_cloze", 2)[1]["answer"]
    with pytest.raises(ConfigError, match="different contexts"):
        export_mc_examples("micro_knowledge_fill", suite, limit=2)


# --------------------------------------------------------------------------------- distillation data

def test_micro_stream_is_random_access_and_budgets_follow_tokens(tok):
    data = {"source": "micro", "batch_size": 3, "corpus": {"max_len": 64}}
    s = make_stream(data, tok, str(TASKS), seed=1)
    a, b = s(4), s(4)
    assert torch.equal(a["input_ids"], b["input_ids"]) and not torch.equal(s(5)["input_ids"], a["input_ids"])
    assert a["input_ids"].shape[0] == 3 and a["input_ids"].shape[1] <= 64
    assert (a["input_ids"][a["attention_mask"] == 0] == tok.pad_token_id).all()
    held = make_stream(data, tok, str(TASKS), seed=1, purpose="heldout")
    assert not torch.equal(held(4)["input_ids"], a["input_ids"])
    assert seq_len_of(data) == 64 and seq_len_of({"source": "web", "seq_len": 2048}) == 2048
    assert stage_steps(None, 3e8, 32, 2048) == 4578 and stage_steps(7, 3e8, 32, 2048) == 7
    with pytest.raises(ConfigError):
        stage_steps(None, None, 1, 1)
    model = build_tiny_model("llama", vocab_size=len(tok))
    assert 1 < heldout_perplexity(model, s, 2) < 5 * len(tok)


def test_web_stream_packs_documents_into_full_rows(tok, monkeypatch):
    docs = ["k1 3 k2 4", "r0 e0 63", "w1 w2 w3 w4 w5"] * 4
    monkeypatch.setattr(WebStream, "_documents", lambda self: iter(docs))
    batches = list(WebStream(tok, seq_len=8, batch_size=2))
    ids = [t for b in batches for row in b["input_ids"].tolist() for t in row]
    assert all(b["input_ids"].shape == (2, 8) for b in batches)
    assert ids[:6] == [tok.bos_token_id, *tok("k1 3 k2 4", add_special_tokens=False)["input_ids"], tok.eos_token_id]


def test_checkpoint_dir_keeps_its_own_run_and_wipes_another(tmp_path):
    d = checkpoint_dir(tmp_path / "stage1.ckpt", {"lr": 1e-3, "heads": [[0, 1]]})
    (d / "step-00000010").mkdir()
    assert (checkpoint_dir(d, {"lr": 1e-3, "heads": [[0, 1]]}) / "step-00000010").is_dir()  # same job: resume
    assert not (checkpoint_dir(d, {"lr": 1e-3, "heads": [[0, 2]]}) / "step-00000010").exists()  # another: restart


# --------------------------------------------------------------------------------- report

def hybrid_results(tmp_path):
    paths = []
    for variant, sel, k, s, kv, kn, ppl in [("teacher", "teacher", 512, None, 0.99, 0.6, 10.0),
                                           ("k0-s64-ranked", "ranked", 0, 64, 0.13, 0.6, 14.0),
                                           ("k10-s64-ranked", "ranked", 10, 64, 0.99, 0.61, 11.0),
                                           ("k20-s64-ranked", "ranked", 20, 64, 0.99, 0.6, 10.8),
                                           ("k10-s64-random", "random", 10, 64, 0.4, 0.6, 13.0),
                                           ("k20-s4-ranked", "ranked", 20, 4, 0.7, 0.6, 12.0)]:
        df = pd.DataFrame([dict(task=t, metric=m, value=v) for t, m, v in [
            ("arc_easy", "acc", kn), ("piqa", "acc", kn), ("mmlu", "acc", 0.4), ("lambada_openai", "acc", 0.5),
            ("lambada_openai", "perplexity", ppl), ("swde", "contains", 0.7), ("kv_retrieval", "top1", kv),
            ("kv_retrieval", "acc", (1 + kv) / 2), ("heldout", "perplexity", ppl)]])
        df = df.assign(model="m", variant=variant, selection=sel, k=k, state_size=s, kept_heads="L0H1")
        p = tmp_path / f"{variant}.csv"
        df.to_csv(p, index=False)
        paths.append(p)
    return paths


def test_hybrid_tables_put_the_published_rows_under_ours_and_findings_read_them(tmp_path):
    roles = {"mmlu": ["mmlu"], "lambada": ["lambada_openai"], "swde": ["swde"], "knowledge": ["arc_easy", "piqa"]}
    f = tmp_path / "figures"
    heads, state = hybrid_distillation.make_hybrid(hybrid_results(tmp_path), roles, "llama-1b", 64, 20, f / "h.png",
                                                   f / "h.pdf", f / "hybrid_heads.csv", f / "hybrid_heads.md",
                                                   f / "hybrid_state_size.csv", f / "hybrid_state_size.md")
    paper = heads[(heads.source == "paper")].set_index("k")
    assert paper.loc[0, "kv_retrieval"] == 13.2 and paper.loc[512, "mmlu"] == 46.0 and 10 in paper.index
    assert list(heads.columns[5:8]) == ["arc_easy", "piqa", "knowledge_avg"]  # knowledge first, then retrieval
    assert list(state[state.source == "paper"].kv_retrieval) == [72.6, 99.3]
    assert (f / "h.png").stat().st_size > 0
    found = {r["claim"].split(":")[1][:30]: r for r in findings.hybrid_distillation.distillation(f)}
    assert len(found) == 5 and all(r["verdict"] in ("holds", "partly", "does not hold") for r in found.values())
    kv = next(r for r in found.values() if "KV 13.2%" in r["claim"])
    assert kv["verdict"] == "holds" and "k=0 13.0" in kv["evidence"]
    # two named KV metrics: mohawk's top-1 (beside the published numbers) and the multiple choice
    ours = heads[heads.source == "ours"].set_index("variant")
    assert ours.loc["k0-s64-ranked", "kv_retrieval"] == pytest.approx(13.0)
    assert ours.loc["k0-s64-ranked", "kv_mc"] == pytest.approx(56.5)
    assert set(heads.kv_metric) == {"top-1 over the vocabulary (mohawk)"}   # ours and the paper's rows
    assert "top-1 over the vocabulary" in kv["evidence"] and "multiple choice over the values k=0 56.5" in kv["evidence"]
    assert "kv_mc" in (f / "hybrid_heads.md").read_text() and "top-1" in (f / "hybrid_heads.md").read_text()
    nothing = tmp_path / "nothing"
    assert [check(nothing) for check in (ssm_masking.ssm_masking, hybrid_attention.hybrid_attention,
                                         layer_swap.layer_swap, distillation_findings.distillation)] == [[], [], [], []]
