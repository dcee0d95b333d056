"""The fast scan's validation models (gna.micro.validation_models): each spec has >= 128 heads;
the shipped checkpoints load, keep that shape, retrieve well above chance on the recall benchmark's
probe, and their exact rankings (benchmarks/results/atp_recall/exact) have >= 10 heads beyond noise (the
benchmark's paired rule: exact McNemar, 5% familywise over the heads)."""
import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

from gna.micro.validation_models import VALIDATION_MODELS

ROOT = Path(__file__).resolve().parents[1]
MIN_HEADS = 128


def _benchmark():
    spec = importlib.util.spec_from_file_location("atp_recall", ROOT / "benchmarks" / "atp_recall.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _shipped(name: str) -> Path:
    """data/models/<name>; the test is skipped, with the command that trains it, where it is not shipped."""
    path = ROOT / "data" / "models" / name
    if not (path / "model.safetensors").is_file():
        pytest.skip(f"{name} is not shipped in data/models (snakemake --cores 1 retrain_validation_models)")
    return path


def _heads(model) -> int:
    from gna.scan import select_mixers

    return sum(m.n_heads for m in select_mixers(model))


@pytest.mark.parametrize("name", sorted(VALIDATION_MODELS))
def test_every_validation_spec_builds_a_model_with_at_least_128_heads(name):
    from gna.micro.family_models import build_model

    spec = VALIDATION_MODELS[name]
    model = build_model(spec["family"], dict(spec["model"]), vocab_size=64, seed=0)
    assert _heads(model) >= MIN_HEADS
    assert spec["train"]["phases"][0]["corpus"]["mmlu_prob"] == 0.0     # the retrieval phase only


@pytest.mark.parametrize("name", sorted(VALIDATION_MODELS))
def test_shipped_validation_model_loads_with_its_heads_and_retrieves_well_above_chance(name):
    import torch

    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode, score

    path = _shipped(name)
    torch.set_num_threads(1)
    model, tok = load_model({"path": str(path)})
    assert _heads(model) >= MIN_HEADS
    pairs = VALIDATION_MODELS[name]["probe_pairs"]
    n = 64     # a fresh seed: not the benchmark's prompts
    enc = encode(generate_kv_probe(pairs, n, 1, separator=" ", fmt="compact"), tok)
    acc = score(model, enc).accuracy
    chance = 1 / pairs
    # "well above chance": four binomial standard errors of chance above it, and at least 3x chance
    assert acc > max(3 * chance, chance + 4 * math.sqrt(chance * (1 - chance) / n)), (name, acc)


def _exact(name: str) -> pd.DataFrame:
    """The shipped exact ranking of ``name`` (the benchmark's cache: the ground truth)."""
    path = ROOT / "benchmarks" / "results" / "atp_recall" / "exact" / f"{name}.csv"
    assert path.is_file(), f"no exact ranking of {name}: run python benchmarks/atp_recall.py --models {name}"
    return pd.read_csv(path)


@pytest.mark.parametrize("name", sorted(VALIDATION_MODELS))
def test_shipped_exact_ranking_has_ten_heads_beyond_noise(name):
    _shipped(name)
    bench = _benchmark()
    ex = _exact(name)
    assert len(ex) >= MIN_HEADS
    pairs, examples, _ = bench.MODELS[name]
    assert (int(ex.pairs.iloc[0]), int(ex.n_examples.iloc[0])) == (pairs, examples)   # the spec's probe
    assert "discordant" in ex and int(bench.beyond_noise(ex).sum()) >= 10


@pytest.mark.parametrize("name", sorted(VALIDATION_MODELS))
def test_the_default_estimate_finds_the_exact_top10_beyond_noise_within_15_percent_of_the_heads(name):
    """The recall target, recomputed from the estimator's code on the benchmark's probe (about 15 s
    a model) against the shipped exact ranking, the ground truth."""
    import torch

    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode

    path = _shipped(name)
    bench = _benchmark()
    torch.set_num_threads(1)
    model, tok = load_model({"path": str(path)})
    pairs, examples, _ = bench.MODELS[name]
    enc = encode(generate_kv_probe(pairs, examples, 0, separator=" ", fmt="compact"), tok)
    rows = bench.curves(_exact(name), bench.estimator_order(model, enc, bench.DEFAULT), len(enc))
    at_target = [r for r in rows if r["share"] <= bench.TARGET_SHARE + 1e-9][-1]
    assert at_target["n_top10_beyond_noise"] >= 9          # a top-10 not ordered by noise
    assert at_target["recall@10_noise"] >= bench.TARGET_RECALL, (name, at_target)


def test_discordant_counts_the_prompts_whose_correctness_one_ablation_changes():
    """scan_heads(discordant=True) against a per-head ablation scored prompt by prompt."""
    import torch

    from gna.interventions import ablate_heads
    from gna.models import load_model
    from gna.probes.kv import generate_kv_probe
    from gna.probes.scoring import encode, score
    from gna.scan import scan_heads

    torch.set_num_threads(1)
    model, tok = load_model({"path": str(ROOT / "data/models/micro-llama")})
    enc = encode(generate_kv_probe(8, 48, 3, separator=" ", fmt="compact"), tok)
    heads = [(3, 3, "attention"), (4, 2, "attention"), (0, 1, "attention")]
    df = scan_heads(model, enc, heads=heads, discordant=True, progress=False).set_index(["layer", "head"])
    right = score(model, enc).logprobs.argmax(-1).eq(enc.answers)
    changed_any = 0
    for layer, head, _ in heads:
        with ablate_heads(model, [(layer, head)]):
            ablated = score(model, enc).logprobs.argmax(-1).eq(enc.answers)
        want = int(ablated.ne(right).sum())
        assert df.loc[(layer, head), "discordant"] == want
        assert df.loc[(layer, head), "drop"] == pytest.approx((int(right.sum()) - int(ablated.sum())) / len(enc))
        changed_any += want
    assert changed_any > 0      # the Gather head L3H3 changes prompts: the comparison is not of zeros


def test_the_paired_noise_rule_is_an_exact_mcnemar_test_at_a_familywise_level():
    bench = _benchmark()
    n = 2000
    assert bench.mcnemar_p(12 / n, 12, n) == pytest.approx(0.5 ** 12)     # 12 prompts turned wrong, none right
    assert bench.mcnemar_p(0.0, 10, n) > 0.5                                # as many turn each way
    assert bench.mcnemar_p(0.01, float("nan"), n) == 1.0                   # not counted: never beyond
    # 128 heads: p < 0.05 / 128 = 3.9e-4. 12 of 12 one way passes (2.4e-4), 11 of 11 does not (4.9e-4)
    ex = pd.DataFrame({"drop": [12 / n, 11 / n, 0.0] + [0.0] * 125, "discordant": [12, 11, 4] + [0] * 125,
                       "n_examples": n})
    assert bench.beyond_noise(ex).tolist()[:3] == [True, False, False]
    assert int(bench.beyond_noise(ex).sum()) == 1


def _quoted(text: str, begin: str, end: str) -> str:
    return text.split(begin, 1)[1].split("-->", 1)[1].split(end, 1)[0].strip()


def test_the_readme_and_the_manual_quote_the_recall_benchmarks_tables():
    """docs/fast-scan.md's recall tables are the benchmark's own output."""
    results = ROOT / "benchmarks/results/atp_recall"
    manual = (ROOT / "docs/fast-scan.md").read_text()
    assert _quoted(manual, "<!-- atp_recall:summary:begin", "<!-- atp_recall:summary:end -->") == \
        (results / "summary.md").read_text().strip()
    quoted = _quoted(manual, "<!-- atp_recall:begin", "<!-- atp_recall:end -->")
    assert quoted == (results / "readme.md").read_text().strip()
    models = pd.read_csv(ROOT / "benchmarks/results/atp_recall/models.csv")
    for name in VALIDATION_MODELS:        # every shipped validation model is in the table
        if (ROOT / "data/models" / name / "model.safetensors").is_file():
            assert name in set(models.model) and f"| {name} |" in quoted, name
