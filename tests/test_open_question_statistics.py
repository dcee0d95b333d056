"""The open questions' statistics: the independence null on constructed pairs, rank intervals on
constructed rankings, and on the shipped micro-llama (200 prompts of the micro study's scan probe):
the query, key and value paths of its Aggregate head, the minimal-set search against brute force, and
roles given only to heads whose drop is beyond noise."""
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from gna.questions.null import beyond_noise_outcomes, pair_reading, pair_test

ROOT = Path(__file__).resolve().parents[1]
MICRO_LLAMA = ROOT / "data" / "models" / "micro-llama"
CHANCE = 1 / 8


def outcomes(killed: np.ndarray, rng) -> np.ndarray:
    """Per prompt correct (the unmodified model is right everywhere): a killed prompt is right at chance."""
    return ~killed | (rng.random(killed.shape) < CHANCE)


def test_independence_null_recovers_an_independent_pair_and_flags_a_serial_one():
    rng = np.random.default_rng(0)
    n = 2000
    base = np.ones(n, bool)
    kill_a, kill_b = rng.random(n) < 0.5, rng.random(n) < 0.6
    guess = rng.random(n) < CHANCE   # one draw per prompt: a prompt killed twice guesses as once
    right = lambda killed: ~killed | guess  # noqa: E731
    independent = pair_test(base, right(kill_a), right(kill_b), right(kill_a | kill_b), CHANCE)
    # each head removes its share independently: the null holds, while the additive reading is strongly
    # negative (the floor at chance caps the pair's drop)
    assert independent["interaction_low"] <= 0 <= independent["interaction_high"]
    assert pair_reading(independent["interaction_low"], independent["interaction_high"]) == "not resolved"
    assert independent["additive_interaction"] < -0.2
    # in series: b reads what a writes, so either alone breaks the same prompts; the pair costs no more
    serial = pair_test(base, right(kill_a), right(kill_a), right(kill_a), CHANCE)
    assert serial["interaction_high"] < -0.2
    assert pair_reading(serial["interaction_low"], serial["interaction_high"]) == "overlapping"
    # redundant: each covers for the other, so each alone costs nothing and both together everything
    none = np.zeros(n, bool)
    both = pair_test(base, right(none), right(none), right(np.ones(n, bool)), CHANCE)
    assert both["interaction_low"] > 0.5 and pair_reading(both["interaction_low"], both["interaction_high"]) == "redundant"


def test_beyond_noise_is_the_paired_mcnemar_rule():
    base = np.ones(200, bool)
    few = base.copy()
    few[:3] = False          # 3 of 200 prompts turned wrong: not beyond noise over 24 heads
    many = base.copy()
    many[:20] = False
    assert beyond_noise_outcomes(base, np.stack([few, many, base]), tested=24).tolist() == [False, True, False]


def test_rank_intervals_separate_signal_from_noise():
    from gna.questions.head_sets import Outcomes
    from gna.questions.stability import rank_intervals

    rng = np.random.default_rng(1)
    heads = [(0, h, "attention") for h in range(6)]
    per_seed = {}
    for s in range(3):
        n = 200
        right = np.ones((6, n), bool)
        right[0] = rng.random(n) > 0.7    # the strongest head: drop 0.7
        right[1] = rng.random(n) > 0.4    # the next: drop 0.4
        right[2:, :] = rng.random((4, n)) > 0.005   # noise: a prompt or two
        margin = right.astype(float)
        per_seed[s] = Outcomes(right, margin, np.ones(n, bool), np.ones(n))
    got = rank_intervals(heads, per_seed, top_k=3, n_boot=300).set_index("head")
    assert got.loc[0].pooled_rank == 1 and got.loc[1].pooled_rank == 2
    assert got.stable_k.iloc[0] == 2 and bool(got.stable.iloc[0])          # the top 3 is the top 2 and noise
    assert got.beyond_noise.tolist() == [True, True, False, False, False, False]
    assert (got.loc[[2, 3, 4, 5], "rank_high"] - got.loc[[2, 3, 4, 5], "rank_low"]).max() >= 2


# -- the shipped micro-llama ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def micro():
    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode, score

    if not (MICRO_LLAMA / "model.safetensors").is_file():
        pytest.skip("data/models/micro-llama is not in this checkout")
    torch.manual_seed(0)
    model, tok = load_model({"path": str(MICRO_LLAMA)})
    examples = generate_kv_probe(8, 200, 0, separator=" ", fmt="compact")   # the micro study's scan probe
    enc = encode(examples, tok)
    return model, tok, examples, enc, score(model, enc)


G, A = (3, 3, "attention"), (4, 2, "attention")   # micro-llama's Gather (previous-token) and Aggregate heads


def test_query_key_value_paths_into_the_aggregate_head(micro):
    """L3H3 removed from L4H2's query, key or value alone (every path, every position): .70 / .44 / .00."""
    from gna.questions.null import bootstrap_means, interval
    from gna.questions.paths import path_patch

    model, _, _, enc, base = micro
    for comps, expected in (("q", 0.70), ("k", 0.44), ("v", 0.00)):
        rows, out = path_patch(model, enc, [(G, A)], baseline=base, via="all", components=comps, outcomes=True)
        drops = out.base_right[None].astype(float) - out.right.astype(float)
        low, high = interval(bootstrap_means(drops))
        assert rows.n_examples[0] == 200
        assert low[0] - 1e-9 <= expected <= high[0] + 1e-9, (comps, low, high)
        assert base.accuracy - rows.accuracy[0] == pytest.approx(expected, abs=0.006)


def test_minimal_set_search_equals_brute_force(micro):
    from gna.questions.head_sets import ablate_sets, set_name
    from gna.questions.pairs import minimal_sets

    model, _, _, enc, base = micro
    ranking = pd.read_csv(ROOT / "tests" / "data" / "exact_rankings_before_gather.csv")
    ranking = ranking[ranking.model == "micro-llama"]
    pool = [(int(r.layer), int(r.head), r.kind) for r in ranking.sort_values("rank").head(4).itertuples()]
    line = CHANCE + 0.1
    found = minimal_sets(model, enc, ranking, pool, chance=CHANCE, margin=0.1, max_size=3, baseline=base)
    subsets = [list(c) for k in (1, 2, 3) for c in itertools.combinations(pool, k)]
    acc = ablate_sets(model, enc, subsets, baseline=base).set_index("heads").accuracy
    reaching = [s for s in subsets if acc[set_name(sorted(s))] <= line + 1e-12]
    smallest = min(len(s) for s in reaching)
    brute = sorted(set_name(sorted(s)) for s in reaching if len(s) == smallest)
    last = found.iloc[-1]
    assert bool(last.reached) and int(last["size"]) == smallest == 2
    assert sorted(last.tying_sets.split()) == brute == ["L3H3+L4H2"]
    assert last.best_accuracy == pytest.approx(0.175) and last.n_examples == 200


def test_roles_only_for_heads_beyond_noise(micro):
    from gna.patterns.ga_roles import classify_heads
    from gna.questions.roles import roles_beyond_noise

    model, tok, examples, enc, base = micro
    top = [G, A, (4, 3, "attention")]
    ga = classify_heads(model, tok, examples[:20], top)
    assert ga.set_index(["layer", "head"]).role[(4, 3)] == "aggregate"   # its pattern alone says Aggregate
    kept = roles_beyond_noise(model, enc, ga, n_heads=24, baseline=base).set_index(["layer", "head"])
    assert kept.role.to_dict() == {(3, 3): "gather", (4, 2): "aggregate", (4, 3): "-"}   # L4H3: drop .000
    assert kept.beyond_noise.to_dict() == {(3, 3): True, (4, 2): True, (4, 3): False} and kept.discordant[(4, 3)] == 0


def test_roles_read_the_scans_counts_and_ablate_again_only_without_them(micro, monkeypatch):
    """The ranking's prompts turned wrong and right per head are the re-ablation's (every head: their
    sum its discordant prompts, their difference its drop), so the noise test read from the ranking
    gives the re-ablation's verdicts without a forward; a ranking without them still gets them by
    ablating again."""
    import gna.questions.roles as roles
    from gna.patterns.ga_roles import classify_heads
    from gna.questions.head_sets import ablate_sets
    from gna.scan import scan

    model, tok, examples, enc, base = micro
    ranking, _ = scan(model, enc, method="exact", baseline=base, progress=False)
    heads = [(int(r.layer), int(r.head), str(r.kind)) for r in ranking.itertuples()]
    again = ablate_sets(model, enc, [[h] for h in heads], baseline=base)
    assert (ranking.right_to_wrong + ranking.wrong_to_right).tolist() == again.discordant.tolist()
    assert np.allclose((ranking.right_to_wrong - ranking.wrong_to_right) / len(enc),
                       again.baseline_accuracy - again.accuracy, atol=1e-12)
    assert ranking.wrong_to_right.sum() > 0   # both directions occur: a sum alone would not tell them apart

    ga = classify_heads(model, tok, examples[:20], [G, A, (4, 3, "attention"), (2, 1, "attention")])
    reablated = roles.roles_beyond_noise(model, enc, ga, n_heads=24, baseline=base)
    older = roles.roles_beyond_noise(model, enc, ga, n_heads=24, baseline=base,
                                     ranking=ranking.drop(columns=["right_to_wrong", "wrong_to_right"]))
    monkeypatch.setattr(roles, "ablate_sets", lambda *a, **k: pytest.fail("ablated although the ranking has the counts"))
    read = roles.roles_beyond_noise(model, enc, ga, n_heads=24, baseline=base, ranking=ranking)
    pd.testing.assert_frame_equal(read, reablated)
    pd.testing.assert_frame_equal(older, reablated)
    assert read.role.tolist() == ["gather", "aggregate", "-", "-"]


def test_readme_and_manual_quote_the_findings_rows():
    """The open questions' claims in the manual are figures/findings.md's rows, verbatim."""
    from gna.report.quote import quoted, rows, table

    findings = (ROOT / "figures" / "findings.md").read_text()
    assert len(rows(findings)) >= 5 and all(r[2] in ("holds", "partly", "does not hold", "not resolved", "n/a")
                                            for r in rows(findings))
    for page in ("docs/open-questions.md",):
        assert quoted((ROOT / page).read_text()) == table(findings), f"{page}: run python -m gna.report.quote"


# -- the fast scan's recall per probe size ---------------------------------------------------------

def test_probe_size_table_is_the_benchmarks_and_gna_scan_warns_at_the_start(tmp_path, capsys):
    from gna.cli import main
    from gna.scan.probe_size import MEASURED, probe_size_warning, prompts_needed

    table = pd.read_csv(ROOT / "benchmarks" / "results" / "atp_recall" / "probe_sizes.csv")
    assert MEASURED == pytest.approx({(r.model, int(r.pairs), int(r.prompts)): float(r.resolved_share)
                                      for r in table.itertuples()}, abs=1e-4)
    need = prompts_needed()
    small = int(table.prompts.min())
    assert need is not None and small < need
    assert "too small" in probe_size_warning("atp+exact", 8, small)
    assert probe_size_warning("atp+exact", 8, need) is None and probe_size_warning("exact", 8, small) is None
    # said before the model loads: a model path that does not exist fails after the warning
    assert main(["scan", str(tmp_path / "no-model"), "--method", "atp+exact", "--pairs", "8", "--n-examples",
                 str(small), "--format", "compact", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "too small for the fast scan's recall" in err and err.index("too small") < err.index("error")
    manual = (ROOT / "docs" / "fast-scan.md").read_text()
    begin = manual.index("<!-- atp_recall:probe_sizes:begin")
    block = manual[manual.index("\n", begin) + 1:manual.index("<!-- atp_recall:probe_sizes:end -->")]
    assert block == (ROOT / "benchmarks" / "results" / "atp_recall" / "probe_sizes.md").read_text()
