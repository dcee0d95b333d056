"""Where a model aggregates: row masks at named position sets of the MC prompt, any head set."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from gna.errors import InterventionError, ProbeError
from gna.experiments.row_sweep import position_sets, prompt_position_sets, row_masked_accuracy, sweep_rows
from gna.interventions import head_set, mask_head_rows, mask_last_row
from gna.models import describe, load_model
from gna.models.tiny import build_tiny_model
from gna.report.findings import hybrid_attention as hybrid_attention_findings
from gna.report.findings import row_sweep as row_sweep_findings
from gna.report.row_sweep import sweep_table

ROOT = Path(__file__).resolve().parents[1]


def _offsets(text: str, pattern=r"\n|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]| "):
    """Character spans of a toy tokenizer that splits "A." into "A", "." (as BPEs do)."""
    return [m.span() for m in re.finditer(pattern, text)]


def test_position_sets_of_a_paper_format_prompt():
    prompt = "Which agency? Pick one.\nA. WPA\nB. CIA\nC. FBI\nD. NSA\nAnswer:"
    offs = _offsets(prompt)
    tok = [prompt[s:e] for s, e in offs]
    sets = position_sets(prompt, offs)
    named = {k: [tok[i] for i in v] for k, v in sets.items()}
    assert named["option_values"] == ["WPA", "CIA", "FBI", "NSA"]
    assert named["option_letters"] == ["A", ".", "B", ".", "C", ".", "D", "."]
    assert named["option_closers"] == ["\n"] * 4
    assert named["question"] == ["Which", " ", "agency", "?", " ", "Pick", " ", "one", ".", "\n"]
    assert named["answer"] == [":"] and sets["all_but_answer"] == list(range(len(tok) - 1))
    # the lone spaces between letter and value belong to no option set
    assert set(sets["option_values"]).isdisjoint(sets["option_letters"])
    assert not any(tok[i] == " " for k in ("option_values", "option_letters") for i in sets[k])
    with pytest.raises(ProbeError):
        position_sets("The capital of France is", _offsets("The capital of France is"))


def _zamba2():
    torch.manual_seed(0)
    return build_tiny_model("zamba2", layers=4, use_shared_attention_adapter=True, adapter_rank=4,
                            attn_implementation="eager")


@pytest.mark.parametrize("heads", ["attention", "ssm"])
def test_row_mask_zeroes_exactly_the_marked_rows_of_the_head_set(heads):
    model = _zamba2()
    grouped = head_set(model, heads)
    assert grouped and all((m.kind == "attention") == (heads == "attention") for m in grouped)
    mixer = next(iter(grouped))
    ids = torch.randint(3, 100, (2, 8))
    marked = torch.zeros(2, 8, dtype=torch.bool)
    marked[0, [2, 5]] = marked[1, 7] = True
    seen = []
    hook = mixer.out_proj.register_forward_hook(lambda m, a, out: seen.append(a[0].detach().clone()))
    with torch.no_grad():
        plain = model(ids).logits
        with mask_head_rows(model, heads, lambda B, T: torch.zeros(B, T, dtype=torch.bool)):
            none = model(ids).logits
        with mask_head_rows(model, heads, lambda B, T: marked):
            masked = model(ids).logits
    hook.remove()
    assert torch.equal(none, plain)                                   # nothing marked: the model itself
    x = seen[-1].unflatten(-1, (mixer.n_heads, -1))                   # the masked call's out_proj input
    assert x[marked].abs().sum() == 0 and x[~marked].abs().sum() > 0
    assert torch.allclose(masked[0, :2], plain[0, :2], atol=1e-6)     # rows before the first mark: untouched
    assert not torch.allclose(masked[0, 2], plain[0, 2], atol=1e-5)
    with pytest.raises(InterventionError, match="row mask of shape"):
        with torch.no_grad(), mask_head_rows(model, heads, lambda B, T: marked[:, :4]):
            model(ids)
    with pytest.raises(InterventionError, match="one of"):
        head_set(model, "mlp")


def test_the_answer_set_is_the_official_last_row():
    model = _zamba2()
    ids = torch.randint(3, 100, (2, 9))
    with torch.no_grad(), mask_last_row(model, "all"):
        official = model(ids).logits
    last = torch.zeros(2, 9, dtype=torch.bool)
    last[:, -1] = True
    with torch.no_grad(), mask_head_rows(model, "attention", lambda B, T: last):
        ours = model(ids).logits
    assert torch.equal(ours, official)


def test_micro_zamba2_attention_aggregates_at_the_option_values_not_the_answer_row():
    """The hand measurement of the issue, as a regression: on the micro hybrid, masking the attention
    heads' answer row costs little, masking their rows at the four option values costs MMLU."""
    model, tok = load_model({"path": str(ROOT / "data/models/micro-zamba2")})
    lines = (ROOT / "data/micro/tasks/micro_mmlu.jsonl").read_text().splitlines()[:48]
    examples = [json.loads(line) for line in lines]
    sets = prompt_position_sets(examples, tok)
    acc = {c: row_masked_accuracy(model, tok, examples, "attention", c, 16, sets)
           for c in ("none", "answer", "option_values")}
    assert acc["none"] > 0.8 and acc["none"] - acc["answer"] < 0.1 and acc["option_values"] < 0.45


def test_the_sweep_keeps_each_conditions_answers_in_one_table_told_apart_by_condition():
    model, tok = load_model({"path": str(ROOT / "data/models/micro-zamba2")})
    lines = (ROOT / "data/micro/tasks/micro_mmlu.jsonl").read_text().splitlines()[:16]
    examples = [json.loads(line) for line in lines]
    kept = []
    rows = sweep_rows(model, tok, {"micro_mmlu": examples}, "attention", "attention", 16, {"model": "m"},
                      ["none", "option_values"], answers=kept)
    answers = pd.concat(kept)
    assert list(answers.groupby("condition", sort=False).value.mean()) == list(rows.value)
    assert set(answers.head_set) == {"attention"} and len(answers) == 2 * len(examples)
    # the same questions under both conditions: one item per place, so the findings can pair them
    by = {c: a.set_index("doc_id").item for c, a in answers.groupby("condition")}
    assert by["none"].equals(by["option_values"])


def _sweep(model, head_set, values):
    conds = ["none", "answer", "option_values", "option_letters", "option_closers", "question", "all_but_answer"]
    return [dict(model=model, head_set=head_set, heads=head_set, condition=c, task="mmlu", value=v, n=200)
            for c, v in zip(conds, values)]


def test_the_finding_says_where_each_head_set_aggregates(tmp_path):
    rows = (_sweep("m", "attention", [0.905, 0.89, 0.23, 0.895, 0.895, 0.905, 0.255])
            + _sweep("m", "ssm", [0.905, 0.26, 0.325, 0.82, 0.46, 0.195, 0.22]))
    sweep_table(pd.DataFrame(rows)).to_csv(tmp_path / "row_sweep.csv", index=False)
    found = {r["claim"].split(" heads")[0].split("the ")[-1]: r for r in row_sweep_findings.row_sweep(tmp_path)}
    assert found["attention"]["verdict"] == "does not hold"
    assert "aggregate at option_values (-67.5); the answer row costs 1.5" in found["attention"]["evidence"]
    # the SSM heads: the answer row costs most (-64.5), but option_values (-58.0) lies within its interval
    # a zero-line part against its smallest effect of interest: too few prompts to tell (gna.report.verdict)
    assert found["ssm"]["verdict"].startswith("not resolved (underpowered") and "aggregate at answer (-64.5)" in found["ssm"]["evidence"]
    assert "the answer row's fall beyond option_values's +0.07 [" in found["ssm"]["evidence"]
    pd.DataFrame([dict(model="m", mode="last_row", k=0, heads_masked="0", mmlu=90.5, knowledge=99.0),
                  dict(model="m", mode="last_row", k=8, heads_masked="all", mmlu=89.0, knowledge=99.0)]
                 ).to_csv(tmp_path / "hybrid_attention.csv", index=False)
    (last_row,) = hybrid_attention_findings.hybrid_attention(tmp_path)
    assert "aggregating at option_values instead" in last_row["evidence"]
    assert row_sweep_findings.row_sweep(tmp_path / "none") == []
