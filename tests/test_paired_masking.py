"""The masking, row-sweep, layer-swap and hybrid parts of the findings, paired on the kept answers: each
part with both conditions' answers is judged paired, its interval a hand count's Newcombe paired one
(at Bonferroni's level where it is a pick among several), and says "unpaired" without them."""
import re

import pandas as pd
import pytest
import torch

from gna.evaluation.items import own_rows, scored_rows
from gna.evaluation.paired import newcombe_paired
from gna.report.findings import hybrid_attention, layer_swap, row_sweep, ssm_masking
from gna.report.findings import hybrid_distillation as distillation_findings
from gna.report.findings.sampled import level_z

N = 200
ST = {"task_n": {"mmlu": N, "knowledge": N, "kv": N}}


def right(n_right: int, n: int = N, offset: int = 0) -> list[int]:
    """``n_right`` of ``n`` answers right, starting at ``offset`` (wrapping)."""
    values = [0] * n
    for i in range(n_right):
        values[(offset + i) % n] = 1
    return values


def table(values: dict, metric: str = "acc", **columns) -> pd.DataFrame:
    """An answers table: {task: each question's 0/1}."""
    return pd.DataFrame([dict(task=task, filter="none", metric=metric, doc_id=i, item=f"{task}{i}", target="0",
                              chosen="", answer="", value=v, **columns)
                         for task, vs in values.items() for i, v in enumerate(vs)])


def write(df: pd.DataFrame, path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)


def part_text(evidence: str, name: str) -> str:
    """One printed part, from its name to its verdict."""
    m = re.search(re.escape(name) + r".*?\): (holds|does not hold|not resolved(?: \(underpowered[^)]*\))?)",
                  evidence)
    assert m, (name, evidence)
    return m.group(0)


def shows(text: str, estimate: float, counts: tuple, z: float | None = None) -> bool:
    low, high = newcombe_paired(*counts) if z is None else newcombe_paired(*counts, z=z)
    return f"{estimate:+.2f} [{low:+.2f}, {high:+.2f}]" in text


def test_the_ssm_masking_parts_pair_the_modes_answers(tmp_path):
    # none: the first 180 right; full: the first 90; pattern: 170 of none's and 6 none missed
    kept = {"none": right(180), "full": right(90), "pattern": right(170)[:180] + [1] * 6 + [0] * 14}
    for mode, values in kept.items():
        write(table({"t_mmlu": values}), tmp_path / "answers" / "m" / f"{mode}.answers.csv")
    pd.DataFrame([dict(model="m", condition=c, mmlu=100 * sum(v) / N, knowledge=90.0, heads="gather=L0H1",
                       selection="classified") for c, v in kept.items()]).to_csv(tmp_path / "ssm_masking.csv",
                                                                                 index=False)
    template = str(tmp_path / "answers" / "{model}" / "{mode}.answers.csv")
    (r,) = ssm_masking.ssm_masking(tmp_path, ST, answers=template, tasks={"mmlu": ["t_mmlu"]})
    full = part_text(r["evidence"], "MMLU's fall fully masked")
    assert shows(full, 0.45, (90, 90, 0, 20)) and "n 200; paired" in full
    pattern = part_text(r["evidence"], "MMLU's fall with the pattern kept")
    assert shows(pattern, 0.02, (170, 10, 6, 14)) and "paired" in pattern and "unpaired" not in r["evidence"]
    # without the answers (an older run): unpaired, and it says why
    (r,) = ssm_masking.ssm_masking(tmp_path, ST)
    assert "unpaired; no per-item answers kept" in part_text(r["evidence"], "MMLU's fall fully masked")


def test_the_row_sweep_pairs_its_conditions_from_one_answers_file(tmp_path):
    conds = {"none": right(180), "answer": right(60), "option_values": right(100, offset=20),
             "option_letters": right(175), "option_closers": right(178), "question": right(179),
             "all_but_answer": right(50)}
    write(pd.concat([table({"t_mmlu": v}, condition=c) for c, v in conds.items()]),
          tmp_path / "answers" / "m" / "attention.answers.csv")
    rows = [dict(model="m", head_set="attention", condition=c, mmlu=100 * sum(v) / N, n=N,
                 drop=100 * (sum(conds["none"]) - sum(v)) / N) for c, v in conds.items()]
    pd.DataFrame(rows).to_csv(tmp_path / "row_sweep.csv", index=False)
    template = str(tmp_path / "answers" / "{model}" / "{head_set}.answers.csv")
    (r,) = row_sweep.row_sweep(tmp_path, {}, answers=template, tasks={"mmlu": ["t_mmlu"]})
    fall = part_text(r["evidence"], "the answer row's MMLU fall")
    assert shows(fall, 0.60, (60, 120, 0, 20)) and "paired" in fall
    # option_values (right on 20..119) against the answer row (right on 0..59): 40 both, 60 and 20 apart
    beyond = part_text(r["evidence"], "the answer row's fall beyond option_values's")
    assert shows(beyond, 0.20, (40, 60, 20, 80)) and "unpaired" not in r["evidence"]


def test_the_hybrid_attention_parts_pair_the_unmodified_models_answers_with_all_heads_masked(tmp_path):
    base = {"t_mmlu": right(180), "t_kn": right(190)}
    write(table(base), tmp_path / "topk" / "z" / "k0.answers.csv")
    # every head masked: the job's file says "all", not the table's k
    write(table({"t_mmlu": right(50), "t_kn": right(188)}), tmp_path / "ha" / "z" / "ablate-kall.answers.csv")
    pd.DataFrame([dict(model="z", mode="ablate", k=0, heads_masked="0", mmlu=90.0, knowledge=95.0),
                  dict(model="z", mode="ablate", k=8, heads_masked="all 8", mmlu=25.0, knowledge=94.0)]).to_csv(
        tmp_path / "hybrid_attention.csv", index=False)
    template = str(tmp_path / "ha" / "{model}" / "{mode}-k{k}.answers.csv")
    (r,) = hybrid_attention.hybrid_attention(tmp_path, ST, answers=template,
                                            tasks={"mmlu": ["t_mmlu"], "knowledge": ["t_kn"]},
                                            base_answers={"z": str(tmp_path / "topk" / "z" / "k0.answers.csv")})
    assert shows(part_text(r["evidence"], "MMLU's fall"), 0.65, (50, 130, 0, 20))
    assert shows(part_text(r["evidence"], "knowledge's fall"), 0.01, (188, 2, 0, 10))
    assert "unpaired" not in r["evidence"]


def test_the_layer_swaps_best_layer_is_paid_for_its_pick_and_paired(tmp_path):
    rows = [dict(model="s", teacher="t", swapped="none", layer=-1, mmlu=25.0, knowledge=90.0)]
    write(table({"t_mmlu": right(50), "t_kn": right(180)}), tmp_path / "t" / "none.answers.csv")
    for layer, mmlu in enumerate([26.0, 24.0, 45.0]):
        rows.append(dict(model="s", teacher="t", swapped=f"L{layer}", layer=layer, mmlu=mmlu, knowledge=90.0))
    # the best layer (L2): the 50 the student had and 40 more
    write(table({"t_mmlu": right(90), "t_kn": right(180)}), tmp_path / "t" / "layer2.answers.csv")
    pd.DataFrame(rows).to_csv(tmp_path / "layer_swap.csv", index=False)
    (r,) = layer_swap.layer_swap(tmp_path, ST, answers=str(tmp_path / "{teacher}" / "{condition}.answers.csv"),
                                      tasks={"mmlu": ["t_mmlu"], "knowledge": ["t_kn"]})
    gain = part_text(r["evidence"], "MMLU's gain")
    assert shows(gain, 0.20, (50, 40, 0, 110), z=level_z(3)) and "the extreme of 3, Bonferroni-adjusted" in gain
    assert "paired" in gain and "unpaired" not in r["evidence"]
    assert shows(part_text(r["evidence"], "knowledge's fall"), 0.0, (180, 0, 0, 20))


def hybrid_row(variant: str, k: int, kv: float, knowledge: float) -> dict:
    return dict(source="ours", variant=variant, selection="ranked", k=k, state_size=16, kv_retrieval=kv,
                kv_retrieval_min=kv, kv_retrieval_max=kv, probe_seeds=2, knowledge_avg=knowledge,
                kv_metric="top-1 over the vocabulary (mohawk)")


def test_the_hybrids_kv_gain_pools_the_probe_seeds_top1_and_pays_for_the_best_k(tmp_path):
    # two probe seeds of N prompts each: the KV top-1 pooled over both (2N), knowledge over its task
    students = {"k0": ([10, 14], 180), "k1": ([12, 12], 178), "k3": ([196, 198], 186)}
    for variant, (kv, kn) in students.items():
        kv_rows = table({f"kv_n20_s{s}": right(x) for s, x in zip((1, 2), kv)}, metric="top1")
        # the multiple choice on the same prompts, another metric: not what kv_retrieval is
        mc = table({f"kv_n20_s{s}": right(N // 2) for s in (1, 2)})
        write(pd.concat([kv_rows, mc, table({"t_kn": right(kn)})]), tmp_path / f"{variant}.answers.csv")
    heads = pd.DataFrame([hybrid_row(v, int(v[1:]), 100 * sum(kv) / (2 * N), 100 * kn / N)
                          for v, (kv, kn) in students.items()])
    rows = distillation_findings.distillation_findings(heads, None, ST, answers=str(tmp_path / "{variant}.answers.csv"),
                                                       tasks={"knowledge": ["t_kn"]})
    found = {r["claim"].split(":")[1][:20]: r for r in rows}
    gain = part_text(found[" a hybrid keeping a "]["evidence"], "KV's gain, k = 0 -> 3")
    # k3's 196 + 198 include k0's 10 + 14: 24 right in both, 370 only in k3, none only in k0, 6 neither
    assert shows(gain, 0.925, (24, 370, 0, 6), z=level_z(2)) and "n 400; paired" in gain
    assert "the extreme of 2, Bonferroni-adjusted" in gain
    spread = part_text(found[" knowledge tasks sta"]["evidence"], "knowledge's largest spread over k")
    assert shows(spread, 0.04, (178, 8, 0, 14), z=level_z(3)) and "paired" in spread


def test_the_project_scored_answers_are_an_item_table_whose_mean_is_the_accuracy():
    examples = [dict(prompt=f"q{i}", choices=[" A", " B"], answer=i % 2) for i in range(4)]
    logprobs = torch.tensor([[0.0, -1.0], [0.0, -1.0], [-1.0, 0.0], [-2.0, -1.0]])
    t = scored_rows("t", examples, logprobs)
    assert list(t.value) == [1.0, 0.0, 0.0, 1.0] and list(t.chosen) == [0, 0, 1, 1] and list(t.doc_id) == [0, 1, 2, 3]
    # the same question keeps its item in another condition; another question under its place does not
    assert t.item.tolist() == scored_rows("t", examples, -logprobs).item.tolist()
    other = own_rows("t", [dict(examples[0], prompt="other"), *examples[1:]], [1, 1, 1, 1], metric="top1")
    assert other.item[0] != t.item[0] and other.item[1] == t.item[1] and set(other.metric) == {"top1"}
    with pytest.raises(ValueError):
        own_rows("t", examples, [1, 0])
