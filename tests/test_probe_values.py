"""KV probe values under any tokenizer (gna.probes.values): no answer a prefix of another choice can beat.

Scored by summed log-prob, a choice whose tokens are a proper prefix of another's always wins over it
(p("7") >= p("7") p("2" | "7")). A tokenizer that splits numbers into digits (SmolLM2, Qwen2.5, Mistral's)
made that true of the paper's values 0..99; here one is built offline, as those pre-tokenize numbers.
"""
import string
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from gna.errors import ProbeError
from gna.probes.kv import generate_kv_probe, lm_eval_task_config, probe_sha256, write_jsonl
from gna.probes.scoring import encode
from gna.probes.values import choose_rule, token_ids, unreachable_answers
from gna.questions.formats import format_probes

ROOT = Path(__file__).resolve().parents[1]


def bpe(digits: bool, merges=None) -> Tokenizer:
    """A character-level BPE that merges every two digits into one token ("72"), unless ``digits``:
    then ``pre_tokenizers.Digits(individual_digits=True)`` splits numbers into digits first, as
    Qwen2.5's and SmolLM2's tokenizers do. ``merges``: these merges instead of the digits'."""
    vocab = {c: i for i, c in enumerate(string.printable)}
    pairs = [(a, b) for a in string.digits for b in string.digits] if merges is None else list(merges)
    for a, b in pairs:
        vocab.setdefault(a + b, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    if digits:
        tok.pre_tokenizer = pre_tokenizers.Digits(individual_digits=True)
    return tok


def hf(tok: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="\x0b")


def unreachable_share(examples, tok) -> float:
    """Share of examples whose answer cannot win: its tokens extend another choice's. The choices
    are tokenized after the prompt's last characters (this tokenizer reads no further back)."""
    choice_ids = []
    for ex in examples:
        tail = ex["prompt"][-8:]
        ids = token_ids(tok, [tail] + [tail + c for c in ex["choices"]])
        choice_ids.append([whole[len(ids[0]):] for whole in ids[1:]])
    flags = unreachable_answers(examples, choice_ids)
    return sum(flags) / len(flags)


@pytest.mark.parametrize("n_pairs, share", [(5, 0.024), (10, 0.078), (20, 0.157), (50, 0.445)])
def test_digit_splitting_leaves_no_answer_unreachable_under_the_two_digit_rule(n_pairs, share):
    tok = bpe(digits=True)
    old = generate_kv_probe(n_pairs, 1000, 0, separator="", fmt="paper")
    assert unreachable_share(old, tok) == pytest.approx(share)   # the paper's 0..99: a ceiling below 1
    assert unreachable_share(old, bpe(digits=False)) == 0         # one token per value: no ceiling
    new = generate_kv_probe(n_pairs, 1000, 0, separator="", fmt="paper", values="10-99")
    assert unreachable_share(new, tok) == 0
    assert all(len(c) == 2 for ex in new for c in ex["choices"]) and all(ex["values"] == "10-99" for ex in new)


def test_the_rule_is_chosen_from_the_tokenizer_and_refused_where_none_fits(word_tokenizer):
    prompt = generate_kv_probe(1, 1, 0, fmt="paper")[0]["prompt"]
    assert choose_rule(bpe(digits=True), prompt, "") == "10-99"
    assert choose_rule(hf(bpe(digits=True)), prompt, " ") == "10-99"
    assert choose_rule(bpe(digits=False), prompt, "") == "0-99"
    assert choose_rule(word_tokenizer, generate_kv_probe(1, 1, 0, fmt="compact")[0]["prompt"], " ") == "0-99"
    # "is" + "12" -> "i", "s1", "2": the value "12" continues as "2", "20" as "2", "0"
    glued = bpe(digits=False, merges=[("s", "1")])
    with pytest.raises(ProbeError, match=r"no KV value rule suits .*10-99: '12' is a prefix of '20'") as e:
        choose_rule(glued, prompt, "", what="glued")
    assert "\n" not in str(e.value)


def test_single_token_probes_are_byte_identical():
    """The micro study's ranking probe (its sha256 is in figures/ranking_seeds.csv) and the paper's."""
    micro = generate_kv_probe(8, 200, 0, separator=" ", fmt="compact")
    assert probe_sha256(micro) == "c602ae6d78b4fa8d3298a7138db831734769a8c35a1ff64d1c45c903ebdf582d"
    assert "c602ae6d78b4" in (ROOT / "figures/ranking_seeds.csv").read_text()
    paper = generate_kv_probe(20, 1000, 0, separator="", fmt="paper", values="0-99")
    assert probe_sha256(paper) == "55781c4564c759c121adfea41095d969e1f090d90469752491bebfb10cd03f9c"
    assert probe_sha256(generate_kv_probe(20, 1000, 0, separator="", fmt="paper", values="10-99")) != probe_sha256(paper)


def test_a_probe_that_breaks_the_rule_is_refused_in_one_line_when_encoded(tmp_path):
    tok = hf(bpe(digits=True))
    examples = generate_kv_probe(20, 30, 0, separator="", fmt="paper")
    with pytest.raises(ProbeError, match=r"encodes to a proper prefix of choice .* can never score higher; .*10-99") as e:
        encode(examples, tok, name="the probe")
    assert "\n" not in str(e.value)
    path = write_jsonl(examples, tmp_path / "kv.examples.jsonl")
    with pytest.raises(ProbeError, match="proper prefix"):   # the lm-eval jobs: before lm-eval runs
        lm_eval_task_config(path, "kv", tokenizer=tok)
    assert lm_eval_task_config(path, "kv")["doc_to_choice"] == "choices"   # without a tokenizer: unchecked
    fixed = generate_kv_probe(20, 30, 0, separator="", fmt="paper", values="10-99")
    assert len(encode(fixed, tok)) == 30
    lm_eval_task_config(write_jsonl(fixed, tmp_path / "ok.examples.jsonl"), "kv", tokenizer=tok)


def test_a_benchmarks_own_choices_are_scored_as_they_are():
    """Only the project's own examples (with n_pairs) are checked: a real benchmark's items stay lm-eval's."""
    item = {"id": "q1", "prompt": "Pick:", "choices": [" 7", " 72"], "answer": 1}
    assert [len(c) for c in encode([item], hf(bpe(digits=True))).choice_ids[0]] == [2, 3]


def test_the_formats_of_the_open_questions_draw_by_the_same_rule():
    tok = hf(bpe(digits=True))
    old = format_probes(20, 40, 0, separator="", values="0-99")
    new = format_probes(20, 40, 0, separator="", values="10-99")
    kv = generate_kv_probe(20, 40, 0, separator="", fmt="compact", values="10-99")
    assert [ex["prompt"] for ex in new["compact"]] == [ex["prompt"] for ex in kv]   # the KV probe's draws
    with pytest.raises(ProbeError, match="proper prefix"):
        encode(old["value"], tok)
    for fmt in ("paper", "compact", "letter", "value"):
        assert len(encode(new[fmt], tok)) == 40
    assert {int(c) for ex in new["paper"] for c in ex["choices"]} <= set(range(10, 100))
    assert new["paper"][0]["id"] == "kv-paper-n20-s0-v10-99-0" and "values" not in old["paper"][0]


@pytest.fixture(scope="module")
def paper_jobs():
    from gna.config.schema import with_defaults
    from gna.plan import dag_jobs

    return dag_jobs(with_defaults(yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text())), workdir=ROOT)


def test_one_study_draws_each_models_values_by_its_tokenizer(paper_jobs):
    """paper.yaml mixes Llama-3 (one token per value) with Zamba2 (Mistral's digits): its KV probes of
    the scan's 20 pairs are the paper's 0-99 file and a 10-99 one, each scan reading its model's."""
    probes = {wc["values_tag"] for rule, wc in paper_jobs if rule == "kv_probe" and wc["n_pairs"] == "20"
              and wc["seed"] == "0"}
    assert probes == {"", "-v10-99"}


def test_smollm2s_own_tokenizer_needs_the_two_digit_rule(smollm2_gguf):
    """The real SmolLM2-135M-Instruct tokenizer (from the pinned GGUF; skipped where it cannot be fetched)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name)
    prompt = generate_kv_probe(1, 1, 0, fmt="paper")[0]["prompt"]
    assert choose_rule(tok, prompt, "") == choose_rule(tok, prompt, " ") == "10-99"
    old = generate_kv_probe(20, 100, 0, separator="", fmt="paper")
    with pytest.raises(ProbeError, match="proper prefix"):
        encode(old, tok)
    new = encode(generate_kv_probe(20, 100, 0, separator="", fmt="paper", values="10-99"), tok)
    assert not any(unreachable_answers([{"answer": a} for a in new.answers.tolist()], new.choice_ids))


def _study_with_tokenizer(tmp_path, tok: Tokenizer) -> dict:
    """The micro study with micro-llama's tokenizer.json replaced by ``tok`` (its config only: the
    dry run reads no weights)."""
    from gna.config.schema import with_defaults

    model = tmp_path / "micro-llama"
    model.mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json"):
        (model / name).write_bytes((ROOT / "data/models/micro-llama" / name).read_bytes())
    tok.save(str(model / "tokenizer.json"))
    config = with_defaults(yaml.safe_load((ROOT / "config.yaml").read_text()))
    config["models"]["micro-llama"]["path"] = str(model)
    return config


def test_auto_reads_a_tokenizer_on_disk_when_the_workflow_is_parsed(tmp_path):
    from gna.plan import dag_jobs
    from gna.plan.jobs import PlanError

    jobs = dag_jobs(_study_with_tokenizer(tmp_path / "digits", bpe(digits=True)), workdir=ROOT)
    scan_probes = {wc["values_tag"] for rule, wc in jobs if rule == "kv_probe" and wc["n_pairs"] == "8"
                   and wc["seed"] == "0"}
    assert scan_probes == {"", "-v10-99"}   # micro-llama now splits digits, the other micro models do not
    with pytest.raises(PlanError, match=r"models\.micro-llama\.kv_values \(auto\): no KV value rule suits"):
        # "k3 ?" + " 12" -> ..., "? 1", "2": after the prompt, "12" continues as "2", "20" as "2", "0"
        glued = bpe(digits=False, merges=[("?", " "), ("? ", "1")])
        dag_jobs(_study_with_tokenizer(tmp_path / "glued", glued), workdir=ROOT)
