"""G&A classification from token-mixing patterns."""
import pytest
import torch

from gna.errors import ProbeError
from gna.patterns.ga_roles import Segments, classify_heads, pattern_scores, segment
from gna.models import describe
from gna.probes.kv import generate_kv_probe

# <s> k1 42 \n k2 7 \n k1 ?   (positions 0..8); lines [1,2,3] and [4,5,6]; query k1 -> line 0
SEG = Segments(lines=[[1, 2, 3], [4, 5, 6]], keys=[[1], [4]], answer_line=0, final=8)


def causal_uniform(T=9):
    w = torch.ones(T, T).tril()
    return w / w.sum(-1, keepdim=True)


def test_hand_made_patterns_are_told_apart():
    gather = torch.eye(9)  # every line token reads its own line's key; others read themselves
    for line, key in zip(SEG.lines, SEG.keys):
        for q in line[1:]:
            gather[q] = 0
            gather[q, key[0]] = 1
    aggregate = causal_uniform().clone()
    aggregate[8] = 0
    aggregate[8, 3] = 1  # the final position reads the answer line's closing token
    mats = torch.stack([gather, aggregate, causal_uniform()])
    g, a = pattern_scores(mats, SEG, "attention")
    assert g[0] == pytest.approx(1.0) and a[0] == pytest.approx(0.0)
    assert a[1] == pytest.approx(1.0) and g[1] < 0.5
    assert g[2] < 0.5 and a[2] < 0.5
    # SSM matrices: signs and the diagonal (D) do not count
    g2, a2 = pattern_scores(-3 * mats + torch.eye(9) * 50, SEG, "mamba2")
    assert torch.allclose(g2, g) and torch.allclose(a2, a)


def test_segment_finds_lines_in_both_formats(word_tokenizer):
    for fmt in ("compact",):
        ex = generate_kv_probe(4, 1, seed=1, fmt=fmt, key_pool=[f"k{i}" for i in range(20)])[0]
        enc = word_tokenizer(ex["prompt"], return_offsets_mapping=True)
        seg = segment(ex, enc["offset_mapping"])
        toks = word_tokenizer.convert_ids_to_tokens(enc["input_ids"])
        assert len(seg.lines) == 4 and all(toks[line[-1]] == "\n" for line in seg.lines)
        assert toks[seg.keys[seg.answer_line][0]] == ex["query"] and toks[seg.final] == "?"
    paper = generate_kv_probe(3, 1, seed=0, fmt="paper")[0]
    offsets = [(i, i + 1) for i in range(len(paper["prompt"]))]  # a character tokenizer
    seg = segment(paper, offsets)
    key_chars = "".join(paper["prompt"][i] for i in seg.keys[seg.answer_line])
    assert len(seg.lines) == 3 and key_chars == paper["query"]
    with pytest.raises(ProbeError, match="no dictionary line"):
        segment({**paper, "query": "absent"}, offsets)


@pytest.mark.parametrize("family", ["llama", "mamba2", "zamba2", "llamba"])
def test_classify_heads_on_real_models(tiny_model, word_tokenizer, family):
    model, _ = tiny_model(family)
    examples = generate_kv_probe(4, 3, seed=0, fmt="compact", key_pool=[f"k{i}" for i in range(20)])
    heads = [h for h in describe(model).heads() if h[2] != "mamba2" or family != "zamba2"][:3]
    attn_before = model.config._attn_implementation
    df = classify_heads(model, word_tokenizer, examples, heads)
    assert len(df) == 3 and df[["gather_score", "aggregate_score"]].stack().between(0, 1).all()
    assert set(df.role) <= {"gather", "aggregate", "-"}
    assert model.config._attn_implementation == attn_before  # eager attention was switched back
