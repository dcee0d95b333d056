"""The open questions' experiments (gna.questions): head sets ablated together equal the plain
ablation of those heads, pair interactions and the greedy set, probe formats on the same keys and
values, rankings over probe seeds, and the mohawk export parsed back."""
import itertools

import pandas as pd
import pytest
import torch
import yaml

from gna.interventions import ablate_heads
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode, score
from gna.questions.head_sets import ablate_sets, margins, set_name
from gna.questions.pairs import minimal_sets, pair_interactions
from gna.scan import scan_heads


@pytest.fixture(scope="module")
def probe(word_tokenizer):
    examples = generate_kv_probe(n_pairs=5, n_examples=12, seed=4, fmt="compact",
                                 key_pool=[f"k{i}" for i in range(20)])
    return encode(examples, word_tokenizer)


def plain(model, probe, heads):
    """The reference: the whole model, the heads ablated by ablate_heads, scored as the scan scores."""
    with ablate_heads(model, heads):
        lp = score(model, probe, batch_size=5).logprobs
    return (lp.argmax(-1).eq(probe.answers).double().mean().item(), margins(lp, probe.answers).mean().item())


@pytest.mark.parametrize("family", ["llama", "mamba2", "zamba2"])
def test_head_sets_equal_plain_ablation(tiny_model, probe, family):
    model, _ = tiny_model(family)
    ranking = scan_heads(model, probe, batch_size=4, progress=False)
    heads = [(int(r.layer), int(r.head), r.kind) for r in ranking.head(4).itertuples()]
    sets = [[h] for h in heads] + [list(p) for p in itertools.combinations(heads, 2)] + [heads[:3]]
    got = ablate_sets(model, probe, sets, batch_size=4, max_rows=10)
    assert len(got) == len(sets) and (got.n_examples == len(probe)).all()
    for s, row in zip(sets, got.itertuples()):
        acc, margin = plain(model, probe, s)
        assert row.heads == set_name(sorted(s))
        assert row.accuracy == pytest.approx(acc, abs=1e-12), s
        assert row.margin == pytest.approx(margin, abs=1e-5), s
    singles = got.iloc[:4].assign(layer=[h[0] for h in heads], head=[h[1] for h in heads])
    ref = ranking.head(4)
    assert singles.accuracy.tolist() == ref.accuracy.tolist()  # a set of one head: the scan's numbers
    assert torch.allclose(torch.tensor(singles.answer_logprob.values), torch.tensor(ref.answer_logprob.values),
                          atol=1e-5)


def test_pair_interactions_and_minimal_sets(tiny_model, probe):
    model, _ = tiny_model("llama")
    ranking = scan_heads(model, probe, batch_size=4, progress=False, model_name="m")
    pairs = pair_interactions(model, probe, ranking, top=4, model_name="m", batch_size=4)
    assert len(pairs) == 6 and set(pairs.rank_a) | set(pairs.rank_b) == {1, 2, 3, 4}
    base, chance = ranking.baseline_accuracy[0], 1 / probe.n_choices
    for r in pairs.itertuples():
        ha, hb = (ranking.iloc[r.rank_a - 1], ranking.iloc[r.rank_b - 1])
        a, b = (int(ha.layer), int(ha["head"]), ha.kind), (int(hb.layer), int(hb["head"]), hb.kind)
        assert r.drop_a == pytest.approx(base - plain(model, probe, [a])[0])
        assert r.drop_ab == pytest.approx(base - plain(model, probe, [a, b])[0])
        assert r.additive_interaction == pytest.approx(r.drop_ab - r.drop_a - r.drop_b)
        keep = lambda d: (base - d - chance) / (base - chance)  # noqa: E731  the above-chance share kept
        expected = chance + (base - chance) * keep(r.drop_a) * keep(r.drop_b)
        assert r.interaction == pytest.approx(expected - (base - r.drop_ab))
        assert r.interaction_low <= r.interaction + 1e-9 and r.interaction - 1e-9 <= r.interaction_high
        assert r.interval_level == pytest.approx(1 - 0.05 / 6)
    pool = [(int(r.layer), int(r.head), r.kind) for r in ranking.head(5).itertuples()]
    found = minimal_sets(model, probe, ranking, pool, chance=0.2, margin=0.0, max_size=3, model_name="m", batch_size=4)
    assert list(found["size"]) == list(range(1, len(found) + 1)) and len(found) <= 3
    # every set of the last size, ablated plainly: the ones at the line are the ties, the best is the lowest
    last = found.iloc[-1]
    accs = {set_name(sorted(c)): plain(model, probe, list(c))[0] for c in itertools.combinations(pool, int(last["size"]))}
    assert last.best_accuracy == pytest.approx(min(accs.values()))
    ties = sorted(k for k, v in accs.items() if v <= 0.2 + 1e-12)
    assert sorted(str(last.tying_sets).split()) == ties and last.n_reaching == len(ties), (last.to_dict(), accs)


# -- prompt formats ------------------------------------------------------------------------------

def test_formats_share_keys_values_and_match_the_kv_probe():
    from gna.questions.formats import FORMATS, format_probes

    probes = format_probes(6, 20, seed=5, formats=FORMATS, n_options=4)
    # paper and compact are gna.probes.kv's own probes, draw for draw
    assert probes["compact"] == generate_kv_probe(6, 20, 5, fmt="compact")
    paper = generate_kv_probe(6, 20, 5, fmt="paper", key_pool=[f"k{i}" for i in range(300)])
    assert [e["prompt"] for e in probes["paper"]] == [e["prompt"] for e in paper]
    for i in range(20):
        c, le, v = probes["compact"][i], probes["letter"][i], probes["value"][i]
        truth = c["choices"][c["answer"]]
        assert le["prompt"] == v["prompt"] and le["prompt"].startswith(c["prompt"] + "\n")
        assert v["choices"][v["answer"]] == truth and le["answer"] == v["answer"]
        assert le["choices"] == [" A", " B", " C", " D"] and set(v["choices"]) <= set(c["choices"])
        assert f"\n{'ABCD'[le['answer']]}{truth}\n" in le["prompt"] + "\n"
    nosep = format_probes(6, 5, seed=5, separator="")
    assert nosep["paper"][0]["choices"][0].isdigit() and nosep["value"][0]["choices"][0].startswith(" ")


def test_ranking_across_formats_by_worst_rank():
    from gna.questions.formats import across_formats, rank_correlations, usable_formats

    heads = [(0, h, "attention") for h in range(4)]
    rows = []
    for fmt, order, base in (("a", [0, 1, 2, 3], 0.9), ("b", [1, 0, 3, 2], 0.8), ("c", [3, 2, 1, 0], 0.3)):
        for r, i in enumerate(order):
            rows.append(dict(model="m", layer=0, head=i, kind="attention", rank=r + 1, drop=0.5 - 0.1 * r,
                             baseline_accuracy=base, chance=0.25, format=fmt))
    rankings = pd.DataFrame(rows)
    assert usable_formats(rankings, 0.1) == ["a", "b"]  # c: 0.3 is not 0.1 above chance
    rho = rank_correlations(rankings).set_index(["format_a", "format_b"]).spearman
    assert rho[("a", "b")] == pytest.approx(0.6) and rho[("a", "c")] == pytest.approx(-1.0)
    out = across_formats(rankings, ["a", "b"], top_k=1)
    assert out["head"].tolist()[:2] == [0, 1]  # worst ranks 2 and 2, mean 1.5 each: by position
    assert out.worst_rank.tolist() == [2, 2, 4, 4]
    assert out.format_sensitive.tolist() == [True, True, False, False]
    assert out.rank_c.tolist() == [4, 3, 2, 1]


# -- rankings over probe seeds -------------------------------------------------------------------

def test_rank_spread_and_topk_overlap():
    from gna.questions.stability import rank_spread, stable_ranking

    rows = []
    for seed, order in ((0, [0, 1, 2, 3]), (1, [1, 0, 2, 3]), (2, [0, 3, 1, 2])):
        for r, h in enumerate(order):
            rows.append(dict(model="m", layer=1, head=h, kind="attention", rank=r + 1, drop=0.4 - 0.1 * r,
                             probe_seed=seed, probe_sha256=f"{seed:064d}"))
    spread = rank_spread(pd.DataFrame(rows), top_k=2)
    by_head = spread.set_index("head")
    assert by_head.loc[0, ["rank_s0", "rank_s1", "rank_s2"]].tolist() == [1, 2, 1]
    assert by_head.loc[3].rank_spread == 2 and by_head.loc[0].min_rank == 1 and by_head.loc[0].max_rank == 2
    # top-2 sets {0,1}, {0,1}, {0,3}: overlaps 1, 1/2, 1/2
    assert spread.topk_overlap[0] == pytest.approx(2 / 3) and spread.topk_overlap_min[0] == 0.5
    assert spread.seeds[0] == "0+1+2" and spread.probe_sha256[0].count("+") == 2
    stable = stable_ranking(spread)
    assert stable["head"].tolist()[0] == 0 and stable["rank"].tolist() == [1, 2, 3, 4]


def test_rank_spread_needs_two_seeds():
    from gna.errors import ConfigError
    from gna.questions.stability import rank_spread

    one = pd.DataFrame([dict(model="m", layer=0, head=0, kind="attention", rank=1, drop=0.1, probe_seed=0,
                             probe_sha256="x")])
    with pytest.raises(ConfigError, match="at least 2 probe seeds"):
        rank_spread(one, 1)


# -- mohawk export -------------------------------------------------------------------------------

def parse_heads(arg):
    """mohawk's tools/hybrid_weights_transfer.py parse_heads, as it reads --heads."""
    return [(int(l), int(h)) for l, h in (item.split(":", 1) for item in arg.split(","))]


def mohawk_ranking():
    # mohawk's Llama-3.2-1B list (HEADS_BY_TEACHER), its first 10 in rank order, then the rest of layer 1
    top = [(9, 25), (4, 4), (10, 26), (0, 20), (8, 20), (8, 19), (8, 16), (7, 22), (10, 20), (5, 5)]
    rest = [(l, h) for l in range(16) for h in range(32) if (l, h) not in top]
    return pd.DataFrame([dict(layer=l, head=h, kind="attention", rank=i + 1) for i, (l, h) in enumerate(top + rest)])


def test_mohawk_export_parses_back_as_mohawks_architecture_10():
    from gna.questions.mohawk import export

    files = export(mohawk_ranking(), 10, n_layers=16, head_dim=64, arch_name="Llama3.2-1B")
    heads = parse_heads(files["heads_10.txt"].strip())
    assert heads == [(9, 25), (4, 4), (10, 26), (0, 20), (8, 20), (8, 19), (8, 16), (7, 22), (10, 20), (5, 5)]
    text = files["architecture_10.yaml"]
    # mohawk's configs/Llama/1B/hybrid/architecture_10.yaml, header comments
    assert text.startswith("# 0 = [20] -> 1\n# 4 = [4] -> 1\n# 5 = [5] -> 1\n# 7 = [22] -> 1\n"
                           "# 8 = [16, 19, 20] -> 3\n# 9 = [25] -> 1\n# 10 = [20, 26] -> 2\n")
    cfg = yaml.safe_load(text)
    blocks = cfg["ComponentsConfig"]["MixerModel"]["Blocks"]
    counts = [b["attn_layer"]["input"]["num_attention_heads"] for b in blocks for _ in range(b["n_layers"])]
    assert counts == [1, 0, 0, 0, 1, 1, 0, 1, 3, 1, 2, 0, 0, 0, 0, 0]
    # mohawk's blocks: runs of equal counts (L1-L3 0, L4-L5 1, ..., L11-L15 0)
    assert [b["n_layers"] for b in blocks] == [1, 3, 2, 1, 1, 1, 1, 1, 5]
    assert all(b["attn_layer"]["input"]["head_dim"] == 64 for b in blocks)
    assert "num_attention_heads: 3 # L8\n" in text and "num_attention_heads: 1 # L4-L5\n" in text
    # the weight transfer's per-layer check: each student layer has as many heads as the map gives it
    per_layer = {l: [h for ll, h in heads if ll == l] for l in range(16)}
    assert [len(per_layer[l]) for l in range(16)] == counts
    assert cfg["ARCH_NAME"] == "Llama3.2-1B-ARCH10"


def test_gna_export_cli_against_the_ranking(tmp_path, capsys):
    from gna.cli import main

    ranking = mohawk_ranking().sample(frac=1, random_state=0)  # row order must not matter, only rank
    path = tmp_path / "m.ranking.csv"
    ranking.to_csv(path, index=False)
    assert main(["export", str(path), "--k", "3", "12", "--out", str(tmp_path / "out"), "--n-layers", "16",
                 "--head-dim", "64"]) == 0
    for k in (3, 12):
        heads = parse_heads((tmp_path / "out" / f"heads_{k}.txt").read_text().strip())
        want = [(int(r.layer), int(r["head"])) for _, r in mohawk_ranking().head(k).iterrows()]
        assert heads == want
        blocks = yaml.safe_load((tmp_path / "out" / f"architecture_{k}.yaml").read_text())[
            "ComponentsConfig"]["MixerModel"]["Blocks"]
        assert sum(b["n_layers"] * b["attn_layer"]["input"]["num_attention_heads"] for b in blocks) == k
    assert main(["export", str(path), "--k", "3", "--out", str(tmp_path / "o2")]) == 2
    assert "give --model" in capsys.readouterr().err
    ssm = pd.DataFrame([dict(layer=0, head=0, kind="mamba2", rank=1)])
    ssm.to_csv(tmp_path / "s.csv", index=False)
    assert main(["export", str(tmp_path / "s.csv"), "--k", "1", "--out", str(tmp_path / "o3"), "--n-layers", "2",
                 "--head-dim", "8"]) == 2
    assert "attention heads" in capsys.readouterr().err


# -- path patching -------------------------------------------------------------------------------

def naive_path(model, probe, sender, receiver, via="direct", components="kv", positions=None):
    """Two plain passes per path, the whole model each: a clean pass records the receiver layer's input
    and the sender's write W_O z_g; the second recomputes the receiver's ``components`` head slices from
    the stream without it, at ``positions(example)`` (a list of token positions; None: every one)."""
    from gna.models import adapter_for

    adapter = adapter_for(model)
    s_mix, r_mix = adapter.describe().mixer(sender[0], "attention"), adapter.describe().mixer(receiver[0], "attention")
    block, D = adapter.layers()[receiver[0]], r_mix.head_dim
    lps = []
    for ex in range(len(probe)):
        ids = torch.tensor([probe.prompt_ids[ex]])
        rec = {}
        h1 = block.register_forward_pre_hook(lambda m, a, k: rec.__setitem__("x", a[0] if a else k["hidden_states"]),
                                             with_kwargs=True)
        h2 = s_mix.out_proj.register_forward_pre_hook(lambda m, a: rec.__setitem__("z", a[0]))
        model(input_ids=ids)
        h1.remove(), h2.remove()
        g = sender[1]
        if via == "direct":
            delta = rec["z"][..., g * D:(g + 1) * D] @ s_mix.out_proj.weight[:, g * D:(g + 1) * D].T
            normed = block.input_layernorm(rec["x"] - delta)
        else:  # the receiver layer's input as it is with the sender ablated
            h1 = block.register_forward_pre_hook(
                lambda m, a, k: rec.__setitem__("x", a[0] if a else k["hidden_states"]), with_kwargs=True)
            with ablate_heads(model, [sender]):
                model(input_ids=ids)
            h1.remove()
            normed = block.input_layernorm(rec["x"])
        hooks = []
        at = slice(None) if positions is None else positions(ex)
        for c in components:
            proj = getattr(r_mix.module, f"{c}_proj")
            j = receiver[1] if c == "q" or not r_mix.kv_heads else r_mix.kv_head_of(receiver[1])
            new = proj(normed)

            def swap(m, a, out, new=new, j=j):
                out = out.clone()
                out[:, at, j * D:(j + 1) * D] = new[:, at, j * D:(j + 1) * D]
                return out
            hooks.append(proj.register_forward_hook(swap))
        lp = model(input_ids=ids).logits[0, -1].float().log_softmax(-1)
        for h in hooks:
            h.remove()
        lps.append([lp[c[0]].item() for c in probe.choice_ids[ex]])
    lps = torch.tensor(lps, dtype=torch.float64)
    return lps.argmax(-1).eq(probe.answers).double().mean().item(), margins(lps, probe.answers).mean().item()


@torch.no_grad()
def test_path_patching_against_naive_and_plain_ablation(tiny_model, probe):
    from gna.questions.ga_paths import ga_matrix
    from gna.questions.paths import path_patch

    model, _ = tiny_model("llama")  # 2 layers of 4 heads
    paths = [((0, g, "attention"), (1, a, "attention")) for g in (0, 2) for a in (1, 3)]
    base = score(model, probe).logprobs
    base_margin = margins(base, probe.answers).mean().item()
    for via in ("direct", "all"):
        got = path_patch(model, probe, paths, batch_size=4, max_rows=8, via=via)
        assert (got.margin != base_margin).any()  # the patch reaches the receiver
        for (s, r), row in zip(paths, got.itertuples()):
            acc, margin = naive_path(model, probe, s, r, via)
            assert row.accuracy == pytest.approx(acc) and row.margin == pytest.approx(margin, abs=1e-5)
    # against plain ablation: with the sender ablated there is nothing to patch out (the plain ablation's
    # numbers); with the receiver ablated, what it reads does not matter (the receiver's ablation)
    s, r = paths[0]
    for ablated, via in itertools.product((s, r), ("direct", "all")):
        with ablate_heads(model, [ablated]):
            patched = path_patch(model, probe, [(s, r)], batch_size=4, via=via)
        acc, margin = plain(model, probe, [ablated])
        assert patched.accuracy[0] == pytest.approx(acc) and patched.margin[0] == pytest.approx(margin, abs=1e-5)
    m = ga_matrix(model, probe, [s], [r], model_name="m", batch_size=4)
    whole = m.baseline_accuracy[0] - plain(model, probe, [s])[0]
    assert m.sender_ablated_drop.tolist() == pytest.approx([whole] * len(m))
    assert set(m.target) == {"head", "logits"} and (m[m.target == "logits"].receiver == "logits").all()
    assert ((m.drop_low <= m["drop"] + 1e-9) & (m["drop"] <= m.drop_high + 1e-9)).all()


@torch.no_grad()
def test_path_patching_by_component_and_position_against_naive(tiny_model, probe, word_tokenizer):
    from gna.probes.kv import generate_kv_probe
    from gna.questions.paths import path_patch, path_to_logits, value_positions

    model, _ = tiny_model("llama")
    examples = generate_kv_probe(n_pairs=5, n_examples=12, seed=4, fmt="compact", key_pool=[f"k{i}" for i in range(20)])
    values = value_positions(examples, word_tokenizer, probe)
    assert all(len(v) == 5 for v in values)  # one token per value in the word tokenizer
    path = [((0, 2, "attention"), (1, 3, "attention"))]
    finals = lambda ex: [len(probe.prompt_ids[ex]) - 1]  # noqa: E731  one row per example: the last prompt token
    for comps, positions, at in (("q", "all", None), ("k", "all", None), ("v", "all", None),
                                 ("kv", "values", lambda ex: values[ex]), ("q", "final", finals)):
        got = path_patch(model, probe, path, batch_size=4, via="all", components=comps, positions=positions,
                         values=values)
        acc, margin = naive_path(model, probe, *path[0], via="all", components=comps, positions=at)
        assert got.accuracy[0] == pytest.approx(acc) and got.margin[0] == pytest.approx(margin, abs=1e-5), comps
        assert (got.components[0], got.positions[0], got.target[0]) == (comps, positions, "head")
    # the direct path to the logits: the sender's write taken out of the final norm's input only
    logits = path_to_logits(model, probe, [path[0][0]], batch_size=4)
    mix = __import__("gna.models", fromlist=["adapter_for"]).adapter_for(model).describe().mixer(0, "attention")
    D, g = mix.head_dim, 2
    lps = []
    for ex in range(len(probe)):
        ids, rec = torch.tensor([probe.prompt_ids[ex]]), {}
        h = mix.out_proj.register_forward_pre_hook(lambda m, a: rec.__setitem__("z", a[0]))
        model(input_ids=ids)
        h.remove()
        delta = rec["z"][..., g * D:(g + 1) * D] @ mix.out_proj.weight[:, g * D:(g + 1) * D].T
        h = model.model.norm.register_forward_pre_hook(lambda m, a: (a[0] - delta,))
        lp = model(input_ids=ids).logits[0, -1].float().log_softmax(-1)
        h.remove()
        lps.append([lp[c[0]].item() for c in probe.choice_ids[ex]])
    lps = torch.tensor(lps, dtype=torch.float64)
    assert logits.accuracy[0] == pytest.approx(lps.argmax(-1).eq(probe.answers).double().mean().item())
    assert logits.margin[0] == pytest.approx(margins(lps, probe.answers).mean().item(), abs=1e-5)
    assert (logits.target[0], logits.receiver[0]) == ("logits", "logits")


def test_path_patching_refuses_what_it_cannot_express(tiny_model, probe):
    from gna.errors import GnaError
    from gna.questions.paths import path_patch

    llama, _ = tiny_model("llama")
    with pytest.raises(GnaError, match="lower layer"):
        path_patch(llama, probe, [((1, 0, "attention"), (0, 1, "attention"))])
    mamba, _ = tiny_model("mamba2")
    with pytest.raises(GnaError, match="in_proj"):
        path_patch(mamba, probe, [((0, 0, "mamba2"), (1, 0, "mamba2"))])


# -- the rules in the paper preset's DAG and plan ------------------------------------------------

def test_paper_dag_and_plan_carry_the_open_questions():
    from pathlib import Path

    from gna.config.schema import with_defaults
    from gna.plan import dag_jobs, plan, summary

    root = Path(__file__).resolve().parents[1]
    cfg = with_defaults(yaml.safe_load((root / "workflow/configs/paper.yaml").read_text()))
    cfg["experiments"]["probe_formats"]["models"] = ["llama-8b"]
    cfg["experiments"]["hybrid_distillation"]["ranking"] = "across_formats"
    jobs = dag_jobs(cfg, workdir=root)
    found = {(r, w.get("model")) for r, w in jobs}
    for rule, model in [("head_pairs", "llama-8b"), ("head_pairs", "llamba-8b"), ("format_scan", "llama-8b"),
                        ("ranking_seed_scan", "llamba-8b"), ("ga_paths", "llama-8b"), ("mohawk_export", "llama-1b")]:
        assert (rule, model) in found, (rule, model)
    # the distilled teacher's kept heads come from its ranking across formats: its format scan is in the DAG
    assert ("format_scan", "llama-1b") in found
    rows = {d["rule"]: d for d in summary(plan(cfg, jobs))}
    for rule in ("head_pairs", "format_scan", "ranking_seed_scan", "ga_paths"):
        assert rows[rule]["gpu"] and 0 < rows[rule]["max_job_hours"] < 3, rows[rule]
    # ranking_seed_scan: one exact scan, as head_scan costs its model (llamba-8b's, not its classification)
    assert rows["ranking_seed_scan"]["max_job_hours"] <= rows["head_scan"]["max_job_hours"]


def test_findings_verdicts_of_the_open_questions(tmp_path):
    from gna.report.findings.open_questions import open_questions

    assert open_questions(tmp_path) == []  # a study without the experiments: no rows
    pair = dict(model="m", head_a="L1H0", head_b="L2H0", interaction=-0.01, interaction_low=-0.05,
                interaction_high=0.03, reading="not resolved", additive_interaction=-0.5, margin_interaction=-12.0,
                margin_interaction_low=-13.0, margin_interaction_high=-11.0, interval_level=0.995, n_examples=200)
    pd.DataFrame([pair, dict(pair, head_b="L2H1", interaction=0.08, interaction_low=0.03, interaction_high=0.12,
                             reading="redundant")]).to_csv(tmp_path / "head_pairs.csv", index=False)
    base = dict(model="m", baseline_accuracy=0.9, chance=0.125, chance_margin=0.1, pool_rule="beyond noise (3 of 8)",
                n_examples=200, note="")
    pd.DataFrame([dict(base, size=1, sets_tried=3, n_reaching=0, best_set="L1H0", best_accuracy=0.4, best_low=0.3,
                       best_high=0.5, tying_sets="", topk_set="L1H0", topk_accuracy=0.4, topk_low=0.3, topk_high=0.5,
                       reached=False),
                  dict(base, size=2, sets_tried=3, n_reaching=1, best_set="L1H0+L2H0", best_accuracy=0.175,
                       best_low=0.125, best_high=0.23, tying_sets="L1H0+L2H0", topk_set="L1H0+L2H0",
                       topk_accuracy=0.175, topk_low=0.125, topk_high=0.23, reached=True)]).to_csv(
        tmp_path / "head_pairs_minimal.csv", index=False)
    pd.DataFrame([dict(model="m", layer=1, head=0, kind="attention", rank=1, worst_rank=1, format_sensitive=False,
                       formats_used="compact", rank_compact=1, rank_letter=2)]).to_csv(
        tmp_path / "probe_formats.csv", index=False)
    seeds = dict(model="m", kind="attention", top_k=3, topk_overlap=0.67, topk_overlap_min=0.67, seeds="0+1+2",
                 probe_sha256="a+b+c", n_prompts=600, stable_k=1, stable=True, beyond_noise=False)
    pd.DataFrame([dict(seeds, layer=1, head=0, pooled_rank=1, rank_low=1, rank_high=1, pooled_drop=0.7,
                       beyond_noise=True),
                  dict(seeds, layer=2, head=0, pooled_rank=2, rank_low=2, rank_high=9, pooled_drop=0.002)]).to_csv(
        tmp_path / "ranking_seeds.csv", index=False)
    path = dict(model="m", sender="L1H0", receiver="L2H0", target="head", via="all", positions="all", n_examples=200,
                sender_ablated_drop=0.6, sender_ablated_low=0.5, sender_ablated_high=0.7, receiver_ablated_drop=0.5)
    pd.DataFrame([dict(path, components="q", drop=0.35, drop_low=0.28, drop_high=0.42),
                  dict(path, components="k", drop=0.1, drop_low=0.05, drop_high=0.15),
                  dict(path, receiver="logits", target="logits", via="direct", components="-", drop=0.0, drop_low=0.0,
                       drop_high=0.0)]).to_csv(tmp_path / "ga_paths.csv", index=False)
    rows = open_questions(tmp_path)
    # the set: the top-2 is the one set at the line, its interval [0.125, 0.23] straddles 0.225; pairs: one pair
    # beyond independence; formats: one usable format; seeds: the one head beyond noise keeps its place;
    # paths: the query path 0.35 [0.28, 0.42] against half the whole 0.30
    assert [r["verdict"] for r in rows] == ["not resolved", "holds", "n/a", "holds", "not resolved"]
    assert "n = 200 prompts" in rows[0]["evidence"] and "1 of 3 sets" in rows[0]["evidence"]
    assert "L1H0+L2H1 0.08 [0.03, 0.12] (redundant)" in rows[1]["evidence"]
    assert "n = 600 prompts" in rows[3]["evidence"] and "L1H0 1 [1, 1]" in rows[3]["evidence"]
    assert "direct write to the logits (another path) 0.000" in rows[4]["evidence"]


def test_experiments_take_heads_from_the_ranking_they_name(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "config.yaml").read_text())
    cfg["experiments"]["topk_removal"]["ranking"] = "over_seeds"
    cfg["experiments"]["hybrid_distillation"]["ranking"] = "across_formats"

    def dry(c, *targets):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(c))
        return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "1", "--configfile",
                               str(path), "--", *targets], cwd=root, capture_output=True, text=True)

    out = dry(cfg, "results/topk_removal/micro-llama/k1.csv", "results/hybrid/micro-llama/k3-s16-ranked.csv")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "results/questions/seeds/micro-llama.ranking.csv" in out.stdout
    assert "results/questions/formats/micro-llama.ranking.csv" in out.stdout
    del cfg["experiments"]["probe_formats"]
    out = dry(cfg, "results/topk_removal/micro-llama/k1.csv")
    assert out.returncode != 0
    assert "hybrid_distillation.ranking = across_formats needs experiments.probe_formats" in out.stdout + out.stderr


def test_a_ranking_names_the_exact_prompts_it_came_from(tmp_path):
    from pathlib import Path

    from gna.cli import main
    from gna.io import sha256_file
    from gna.probes.kv import probe_sha256, read_jsonl

    micro = Path(__file__).resolve().parents[1] / "data/models/micro-llama"
    assert main(["scan", str(micro), "--out", str(tmp_path / "s"), "--format", "compact", "--pairs", "4",
                 "--n-examples", "16", "--classify-top", "2", "--classify-examples", "2"]) == 0
    probe = tmp_path / "s/probe.examples.jsonl"
    ranking = pd.read_csv(tmp_path / "s/ranking.csv")
    assert (ranking.probe_sha256 == sha256_file(probe)).all()
    assert probe_sha256(read_jsonl(probe)) == sha256_file(probe)
