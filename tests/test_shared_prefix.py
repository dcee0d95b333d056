"""eval.shared_prefix: each context once, its continuations on copies of its cache. The same
log-probabilities and greedy flags as lm-eval's own path, under every intervention an evaluation
job applies, and the fallbacks where sharing cannot hold."""
import pytest
import torch

from gna.evaluation.lm_eval_bridge import encoding_once
from gna.evaluation.shared_prefix import shareable, sharing_contexts
from gna.interventions.vocabulary import applied


def requests_of(tokenizer):
    """Multiple-choice requests as lm-eval builds them: shared contexts, 1- to 4-token continuations."""
    contexts = ["the cat sat on the mat and the dog", "a b c d e f", "one two three four five six seven"]
    answers = [" ran", " sat on the", " the mat", " a b c d", " seven"]
    out = []
    for c in contexts:
        ctx = tokenizer(c, add_special_tokens=False)["input_ids"]
        for a in answers:
            out.append(((c, a), ctx, tokenizer(a, add_special_tokens=False)["input_ids"]))
    return out


def scores(lm_class, model, tokenizer, requests, batch_size=3):
    from lm_eval.models.huggingface import HFLM

    lm = encoding_once(lm_class)(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=64,
                                 softmax_dtype=torch.float32)
    assert isinstance(lm, HFLM)
    return lm._loglikelihood_tokens(requests, disable_tqdm=True)


@pytest.mark.parametrize("interventions", [
    [], [{"truncate": 2}], [{"drop_layer": 1}], [{"ablate_heads": [[0, 1], [1, 3]]}],
    [{"truncate": 3}, {"keep_heads": {"layer": 2, "heads": [0, 2]}}],
], ids=["none", "truncate", "drop_layer", "ablate_heads", "truncate+keep_heads"])
def test_shared_contexts_score_as_lm_eval_does(tiny_model, interventions):
    from lm_eval.models.huggingface import HFLM

    model, tokenizer = tiny_model("llama", num_hidden_layers=4)
    requests = requests_of(tokenizer)
    assert any(len(r[2]) > 1 for r in requests) and any(len(r[2]) == 1 for r in requests)
    with applied(model, interventions):
        assert shareable(model)
        want = scores(HFLM, model, tokenizer, requests)
        got = scores(sharing_contexts(HFLM), model, tokenizer, requests)
    assert [g for _, g in got] == [g for _, g in want]
    assert torch.allclose(torch.tensor([s for s, _ in got]), torch.tensor([s for s, _ in want]), atol=1e-4, rtol=0)
    assert len({round(s, 3) for s, _ in want}) > 5   # the requests score differently: the check can fail


def test_a_skipped_first_layer_or_a_non_attention_model_takes_lm_evals_path(tiny_model):
    llama, _ = tiny_model("llama", num_hidden_layers=4)
    with applied(llama, [{"drop_layer": 0}]):
        assert not shareable(llama)
    assert shareable(llama)
    mamba, _ = tiny_model("mamba2")
    assert not shareable(mamba)


def test_a_request_lm_eval_would_truncate_goes_its_own_way(tiny_model):
    from lm_eval.models.huggingface import HFLM

    model, tokenizer = tiny_model("llama", num_hidden_layers=2)
    long_ctx = tokenizer(" ".join(["the cat sat"] * 40), add_special_tokens=False)["input_ids"]
    assert len(long_ctx) > 65
    requests = [(("x", " ran"), long_ctx, tokenizer(" ran", add_special_tokens=False)["input_ids"])]
    requests += requests_of(tokenizer)[:3]
    want = scores(HFLM, model, tokenizer, requests)
    got = scores(sharing_contexts(HFLM), model, tokenizer, requests)
    assert torch.allclose(torch.tensor([s for s, _ in got]), torch.tensor([s for s, _ in want]), atol=1e-4, rtol=0)
