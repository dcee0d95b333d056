"""Attribution patching: the estimate is the score's derivative along each head's zero-ablation, and
atp+exact with every head a candidate is the exact scan."""
import pytest
import torch

from gna.scan.attribution import atp_scan, choice_score
from gna.scan.attribution_ranking import upper_bound
from gna.errors import ConfigError
from gna.interventions import head_mask
from gna.models import describe
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, iter_batches
from gna.scan import scan, scan_heads

FAMILIES = [("llama", {}), ("qwen2", {}), ("mamba2", {}), ("zamba2", {}), ("llamba", {}),
            ("mamba1", {"adapter_options": {"channel_group": 8}})]


@pytest.fixture(scope="module")
def probe(word_tokenizer):
    examples = generate_kv_probe(n_pairs=5, n_examples=6, seed=3, fmt="compact", key_pool=[f"k{i}" for i in range(20)])
    return encode(examples, word_tokenizer)


def scaled_score(model, probe, mixer, head, scale, score):
    """Mean score with one head's output multiplied by ``scale``, log-probs in float64."""
    total = 0.0
    for b in iter_batches(probe, 4):
        mask = torch.ones(b.input_ids.shape[0], mixer.n_heads, dtype=torch.float64)
        mask[:, head] = scale
        with torch.no_grad(), head_mask(model, mixer.layer, mask, mixer.kind):
            logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits.double()
        lp = logits[b.score_rows, b.score_pos].log_softmax(-1)[b.target_index, b.target_token]
        lp = lp.new_zeros(len(b.examples) * b.n_choices).index_add_(0, b.target_slot, lp).view(-1, b.n_choices)
        total += choice_score(lp, probe.answers[b.examples], score).sum().item()
    return total / len(probe)


@pytest.mark.parametrize("family,spec", FAMILIES)
@pytest.mark.parametrize("score", ["margin", "logprob"])
def test_estimate_equals_finite_difference(tiny_model, probe, family, spec, score):
    """a_h . dS/da_h is d/ds S(head scaled by s) at s = 1: a central difference in float64."""
    model, _ = tiny_model(family, spec=spec)
    model.double()
    mixers = describe(model).mixers
    est = atp_scan(model, probe, mixers, batch_size=4, score=score, progress=False)
    assert len(est) == describe(model).n_heads_total
    assert all(p.requires_grad for p in model.parameters())  # the flags are restored
    checked = 0
    for mixer in mixers[:3]:  # Zamba2: a Mamba-2 layer, then an attention invocation and its Mamba-2
        for head in (0, mixer.n_heads - 1):
            def central(eps):
                return (scaled_score(model, probe, mixer, head, 1 + eps, score)
                        - scaled_score(model, probe, mixer, head, 1 - eps, score)) / (2 * eps)
            # Richardson: error O(eps^4). A smaller eps drowns in the models' float32 parts (Mamba's
            # logits, rotary tables): a step of 1e-4 is already off by ~1e-3 relative.
            fd = (4 * central(0.01) - central(0.02)) / 3
            row = est[(est.layer == mixer.layer) & (est.kind == mixer.kind) & (est["head"] == head)]
            assert row.atp_drop.item() == pytest.approx(fd, rel=1e-3, abs=2e-6), (mixer, head)
            checked += 1
    assert checked >= 4


def test_graddrop_is_the_plain_estimate_without_cancellation(tiny_model, probe):
    """A last-layer head's gradient passes no later layer: blocking an earlier layer leaves it as is,
    blocking its own zeroes it, so sum_l |AtP_l| / (L - 1) is |AtP| there."""
    model, _ = tiny_model("llama")
    mixers = describe(model).mixers
    plain = atp_scan(model, probe, mixers, batch_size=4, progress=False)
    gd = atp_scan(model, probe, mixers, batch_size=4, graddrop=True, progress=False)
    assert (gd.atp_magnitude >= 0).all() and torch.allclose(torch.tensor(gd.atp_drop), torch.tensor(plain.atp_drop))
    # the last layer's heads: blocking layer 0 leaves their gradient as is, blocking layer 1 zeroes it
    last = plain.layer == plain.layer.max()
    assert torch.allclose(torch.tensor(gd.atp_magnitude[last].values),
                          torch.tensor(plain.atp_drop[last].abs().values), rtol=1e-5, atol=1e-9)
    # without GradDrop the magnitude is the mean of per-example |estimates|: at least |mean|
    assert (plain.atp_magnitude >= plain.atp_drop.abs() - 1e-12).all()
    assert (plain.atp_magnitude > plain.atp_drop.abs() + 1e-6).any()


@pytest.mark.parametrize("family", ["llama", "zamba2"])
def test_atp_exact_with_every_head_is_the_exact_scan(tiny_model, probe, family):
    model, _ = tiny_model(family)
    n = describe(model).n_heads_total
    exact = scan_heads(model, probe, batch_size=4, max_rows=24, progress=False, model_name="m")
    both, guard = scan(model, probe, method="atp+exact", candidates=n, batch_size=4, max_rows=24, progress=False,
                       model_name="m")
    assert both.exact.all() and guard.candidates == n and guard.sampled == 0
    assert both[exact.columns].equals(exact)


def test_atp_exact_guard_and_atp_only(tiny_model, probe):
    model, _ = tiny_model("zamba2")
    n = describe(model).n_heads_total
    ranking, guard = scan(model, probe, method="atp+exact", candidates=4, guard_sample=5, guard_k=2,
                          batch_size=4, progress=False)
    assert len(ranking) == n and (ranking["rank"] == range(1, n + 1)).all()
    assert ranking.exact.sum() == 9 and ranking.exact.head(9).all()  # verified rows first
    assert ranking.accuracy.isna().sum() == n - 9
    # the ablated heads keep the prompts their ablation turned wrong and right, as the exact scan counts them
    counts = scan_heads(model, probe, batch_size=4, progress=False, discordant=True)
    ablated = ranking[ranking.exact].merge(counts, on=["layer", "head", "kind"], suffixes=("", "_exact"))
    for c in ("right_to_wrong", "wrong_to_right"):
        assert ablated[c].astype(int).tolist() == ablated[f"{c}_exact"].tolist()
        assert ranking[c].isna().sum() == n - 9
    assert (ablated.right_to_wrong + ablated.wrong_to_right).astype(int).tolist() == ablated.discordant.tolist()
    assert guard.sampled == 5 and guard.unverified == n - 9 and 0 <= guard.sample_beats_kth <= 5
    again, _ = scan(model, probe, method="atp+exact", candidates=4, guard_sample=5, guard_k=2, batch_size=4,
                    progress=False)
    assert again.equals(ranking)  # the sample is seeded
    only, g = scan(model, probe, method="atp", batch_size=4, progress=False)
    assert not only.exact.any() and only.atp_magnitude.is_monotonic_decreasing and g.method == "atp"
    with pytest.raises(ConfigError, match="scan.method = 'fast'"):
        scan(model, probe, method="fast")
    with pytest.raises(ConfigError, match="scan.candidates = 0"):
        scan(model, probe, method="atp+exact", candidates=0, progress=False)


def test_upper_bound():
    assert upper_bound(0, 0, 100) == 100
    assert upper_bound(0, 30, 100) == pytest.approx(100 * (1 - 0.05 ** (1 / 30)))  # the rule of three's exact form
    assert upper_bound(3, 30, 100) > upper_bound(1, 30, 100) > upper_bound(0, 30, 100)
