"""The atp+exact guard's cost and reach, said before it works; its passes sharing the clean forward;
and choices whose rows extend one another sharing a row (the scan's batch shapes)."""
from pathlib import Path

import pytest
import torch

from gna.models import load_model
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, iter_batches
from gna.scan import naive_scan_heads, scan_heads
from gna.scan import attribution_ranking as ar
from gna.scan.guard_bounds import draws_to_level, guard_plan, mcnemar_p, min_turned_wrong, upper_bound

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def micro_llama():
    return load_model({"path": str(ROOT / "data/models/micro-llama")})


def probe(tok, n: int = 32):
    return encode(generate_kv_probe(8, n, 0, separator=" ", fmt="compact"), tok)


def run_guard(model, enc, monkeypatch, **kw):
    """attribution_ranking with every line it says, and where the estimate started, in one list."""
    events = []
    real = ar.atp_scan
    monkeypatch.setattr(ar, "atp_scan", lambda *a, **k: (events.append("atp starts"), real(*a, **k))[1])
    ranking, guard = ar.attribution_ranking(model, enc, "atp+exact", progress=False, say=events.append,
                                            **{**dict(candidates=4, guard_sample=2), **kw})
    return ranking, guard, events


def test_the_guard_states_its_cost_before_any_work(micro_llama, monkeypatch):
    model, tok = micro_llama
    ranking, guard, events = run_guard(model, probe(tok), monkeypatch, guard_k=1, guard_level=0.3)
    assert events[1] == "atp starts"
    line = events[0]
    # 4 candidates + 9 draws with no hit (the bound at 9 draws of 20: 0.28 <= 0.3); at most all 24 heads
    assert "at least 13 heads (no hit), at most all 24" in line
    assert draws_to_level(0, 20, 0.3) == 9 and upper_bound(0, 8, 20) / 20 > 0.3
    # the worst case in forwards per prompt row: micro-llama's 6 layers x 4 heads, a head of layer l runs 6 - l
    assert f"{sum(4 * (6 - layer) / 6 for layer in range(6)):.1f} forwards per prompt row" in line
    assert guard.heads_max == 24 and guard.level_met and guard.stopped is None
    assert ranking["exact"].sum() == guard.candidates + guard.sampled <= guard.heads_max


@pytest.mark.parametrize("case", ["too few heads", "too few prompts"])
def test_a_level_the_probe_cannot_support_is_said_first_and_not_chased(micro_llama, monkeypatch, case):
    """On main the guard drew every head, pass after pass, before its summary said the level was unmet."""
    model, tok = micro_llama
    # 20 non-candidates: no hit among all 20 still bounds their share at 0.14 > 0.05;
    # 4 prompts: 3.5 above chance, and a drop is beyond noise among 24 heads from 9 prompts turned wrong
    level, n = (0.05, 32) if case == "too few heads" else (0.3, 4)
    ranking, guard, events = run_guard(model, probe(tok, n), monkeypatch, guard_k=1, guard_level=level)
    assert events[2] == "atp starts"
    assert events[1].startswith(f"the probe cannot support the guard's level {level:.2f}: ")
    assert ("too few heads" in events[1]) == (case == "too few heads")
    assert ("only when it turns at least 9 prompts wrong" in events[1]) == (case == "too few prompts")
    assert guard.sampled == 2 and guard.level_met is False and guard.stopped
    assert ranking["exact"].sum() == 4 + 2
    assert "NOT met: the guard stopped" in guard.summary()


def test_a_bar_within_noise_stops_the_guard_at_its_first_draws(micro_llama, monkeypatch):
    model, tok = micro_llama
    # micro-llama's third candidate here changes no prompt: heads that do nothing tie it or beat it
    ranking, guard, events = run_guard(model, probe(tok), monkeypatch, guard_k=3, guard_level=0.3)
    assert guard.kth_candidate_p == 1.0 and guard.sampled == 2 and guard.level_met is False
    assert events[-1].startswith("guard stopped after 2 draws, level 0.30 not met: its bar, candidate #3")
    assert "not beyond noise" in events[-1]


def test_the_guards_passes_share_one_clean_forward(micro_llama, monkeypatch):
    """Each exact pass used to run its own clean forward per batch; now the first one's are kept."""
    from gna.scan import repeated_forwards

    model, tok = micro_llama
    enc = probe(tok)
    calls = []
    real = repeated_forwards.capture_layer_inputs
    monkeypatch.setattr(repeated_forwards, "capture_layer_inputs", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    passes = []
    real_scan = ar.scan_heads
    monkeypatch.setattr(ar, "scan_heads", lambda *a, **k: (passes.append(1), real_scan(*a, **k))[1])
    ranking, guard = ar.attribution_ranking(model, enc, "atp+exact", candidates=4, guard_sample=2, guard_k=1,
                                            guard_level=0.3, batch_size=16, progress=False)
    batches = len(list(iter_batches(enc, 16)))
    assert len(passes) == 2 and batches == 2                # the candidates and first draws, then the rest
    assert len(calls) == batches == guard.clean_forwards  # not passes x batches
    # the kept forwards give the numbers a fresh scan computes, to the bit
    verified = ranking[ranking.exact]
    fresh = scan_heads(model, enc, batch_size=16, progress=False,
                       heads=[(int(r.layer), int(r.head), r.kind) for r in verified.itertuples()])
    j = verified.merge(fresh, on=["layer", "head", "kind"], suffixes=("", "_fresh"))
    assert len(j) == len(verified) and (j.accuracy == j.accuracy_fresh).all()
    assert (j.answer_logprob == j.answer_logprob_fresh).all()


def test_guard_statistics():
    assert [min_turned_wrong(h) for h in (24, 128, 270)] == [9, 12, 13]   # 0.5^w < 0.05 / heads
    assert 0.5 ** 13 < 0.05 / 270 <= 0.5 ** 12
    assert mcnemar_p(0.5, 16, 32) == pytest.approx(0.5 ** 16)          # 16 changed, all turned wrong
    assert mcnemar_p(0.0, 0, 32) == 1.0 and mcnemar_p(0.0, 4, 32) > 0.5
    assert draws_to_level(0, 8, 0.25) is None                          # 8 heads cannot bound a share at 0.25
    need = draws_to_level(2, 254, 0.25)
    assert upper_bound(2, need, 254) / 254 <= 0.25 < upper_bound(2, need - 1, 254) / 254
    plan = guard_plan([0] * 9 + [1] * 9, 2, 4, 2, 1, None, 100, 0.9, 0.1)
    assert plan["heads_max"] == plan["heads_min"] == 6 and plan["forwards_max"] == 6.0 and not plan["unsupported"]


@pytest.mark.parametrize("family", ["llama", "mamba2"])
def test_choices_that_extend_one_another_share_a_row(tiny_model, word_tokenizer, family):
    """" 4 2", " 4" and " 4 7": one row per choice used to run the prompt once per choice; a choice
    whose row (prompt + its tokens but the last) another's extends is read off that longer row. The
    scan still equals the naive loop, which runs each choice alone."""
    examples = generate_kv_probe(6, 10, 3, fmt="compact", key_pool=[f"k{i}" for i in range(20)])
    for ex in examples:
        ex["choices"] = [" " + " ".join(c.strip()) for c in ex["choices"]]  # "42" -> "4 2": one or two tokens
        del ex["n_pairs"]  # as a benchmark's items, not a KV probe of the project's (gna.probes.values refuses those)
    enc = encode(examples, word_tokenizer)
    assert not enc.one_row
    tails = [{tuple(c[:-1]) for c in cs} for cs in enc.choice_ids]
    longest = sum(not any(len(u) > len(t) and u[:len(t)] == t for u in ts) for ts in tails for t in ts)
    rows = sum(b.input_ids.shape[0] for b in iter_batches(enc, 12))
    assert rows == longest < len(enc) * enc.n_choices
    model, _ = tiny_model(family)
    fast = scan_heads(model, enc, batch_size=12, max_rows=24, progress=False)
    slow = naive_scan_heads(model, enc)
    j = fast.merge(slow, on=["layer", "kind", "head"], suffixes=("", "_naive"))
    assert (j.accuracy == j.accuracy_naive).all() and (j["rank"] == j["rank_naive"]).all()
    torch.testing.assert_close(torch.tensor(j.answer_logprob.values), torch.tensor(j.answer_logprob_naive.values),
                               atol=1e-5, rtol=0)  # batched against unbatched sums of one fp32 computation
