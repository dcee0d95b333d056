"""Which numbers a KV probe's values are drawn from, so that every answer can win under the model's tokenizer.

A choice is scored by its summed log-prob, so a choice whose tokens are a proper prefix of another
choice's always scores at least as high: ``p("7") >= p("7") p("2" | "7")``. Under a tokenizer that
splits numbers into digits (SmolLM2, Qwen2.5, Gemma, Mistral's) the values 0..99 ("7" and "72") make
the right answer "72" unable to win in 2.4%, 7.8%, 15.7% and 44.5% of the paper's prompts at 5, 10,
20 and 50 pairs (separator "", seed 0, 1,000 prompts): a ceiling below 1 that grows with the pairs.

Value rules (``kv_probe`` files and ids name a rule other than the default)::

    0-99    the paper's: distinct numbers 0..99; one token each under Llama-3 and word-level tokenizers
    10-99   two digits each: no value's text is a prefix of another's, so no tokenization of it is either

:func:`choose_rule` picks the first rule under which no value's tokens (in the context the prompt
ends with, separator included) are a proper prefix of another's; :func:`check_encoded` refuses a
probe of the project's own that breaks this, before a model runs. Copies of real benchmarks are not
checked: their choices are lm-eval's as they are.
"""
from __future__ import annotations

from ..errors import ProbeError

VALUE_RULES = {"0-99": range(0, 100), "10-99": range(10, 100)}
DEFAULT_RULE = "0-99"  # the paper's; probe files of this rule keep their names and bytes
RULE_ADVICE = ("draw the values so that none is a prefix of another: kv_probe values rule '10-99' (pipeline: "
               "models.<name>.kv_values: 10-99, or 'auto' with the tokenizer on disk; CLI: --values 10-99)")


def values_of(rule: str) -> range:
    """The numbers a rule draws from; ProbeError for an unknown rule."""
    if rule not in VALUE_RULES:
        raise ProbeError(f"KV value rule {rule!r} is not one of {list(VALUE_RULES)}")
    return VALUE_RULES[rule]


def rule_tag(rule: str) -> str:
    """What a probe's name adds for ``rule``: nothing for the default (its files keep their names)."""
    values_of(rule)
    return "" if rule == DEFAULT_RULE else f"-v{rule}"


def is_synthetic(example: dict) -> bool:
    """The project's own KV examples (gna.probes.kv, gna.questions.formats) carry ``n_pairs``."""
    return "n_pairs" in example


def prefix_pair(choice_ids) -> tuple[int, int] | None:
    """``(i, j)``: choice i's tokens are a proper prefix of choice j's (so j can never outscore i);
    None where no such pair exists. ``choice_ids``: (C, m_c) token ids of one example's choices."""
    seqs = [tuple(c) for c in choice_ids]
    present = {s: i for i, s in enumerate(seqs)}
    for j, s in enumerate(seqs):
        for m in range(1, len(s)):
            i = present.get(s[:m])
            if i is not None:
                return i, j
    return None


def unreachable_answers(examples, choice_ids) -> list[bool]:
    """Per example: the answer's tokens extend another choice's, so the answer can never win (ties go
    to the first choice, a strict prefix has a log-prob at least as high)."""
    out = []
    for ex, cs in zip(examples, choice_ids):
        ans = tuple(cs[ex["answer"]])
        others = {tuple(c) for k, c in enumerate(cs) if k != ex["answer"]}
        out.append(any(ans[:m] in others for m in range(1, len(ans))))
    return out


def check_encoded(examples, choice_ids, name: str = "probe set") -> None:
    """ProbeError, one line, where an example of the project's own has a choice whose tokens are a
    proper prefix of another choice's (``choice_ids``: (N, C, m) as :func:`gna.probes.scoring.encode`
    tokenizes them)."""
    for k, (ex, cs) in enumerate(zip(examples, choice_ids)):
        if not is_synthetic(ex):
            continue
        pair = prefix_pair(cs)
        if pair is not None:
            i, j = pair
            raise ProbeError(f"{name}: example {ex.get('id', f'#{k}')!r}: choice {ex['choices'][i]!r} encodes to a "
                             f"proper prefix of choice {ex['choices'][j]!r}'s tokens, so {ex['choices'][j]!r} can "
                             f"never score higher; {RULE_ADVICE}")


def check_examples(examples, tokenizer, name: str = "probe set") -> None:
    """:func:`check_encoded` with the choices tokenized here as :func:`gna.probes.scoring.encode` does (for
    jobs that hand the probe to lm-eval, which would score it as it is)."""
    synthetic = [ex for ex in examples if is_synthetic(ex)]
    choice_ids = []
    for ex in synthetic:
        ctx = ex["prompt"].rstrip()
        lead = ex["prompt"][len(ctx):]
        ids = token_ids(tokenizer, [ctx] + [ctx + lead + c for c in ex["choices"]])
        choice_ids.append([whole[len(ids[0]):] for whole in ids[1:]])
    check_encoded(synthetic, choice_ids, name)


def token_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids without special tokens, from a transformers tokenizer or a ``tokenizers.Tokenizer``."""
    if hasattr(tokenizer, "encode_batch"):  # tokenizers.Tokenizer
        return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def values_encoded(tokenizer, prompt: str, separator: str, rule: str) -> list[list[int]]:
    """(V, m_v) tokens of every value of ``rule`` as the continuation of ``prompt`` (as
    :func:`gna.probes.scoring.encode` takes them: the prompt's trailing white space moves to the
    continuation, and a merge across the boundary is tokenized as in the whole text)."""
    ctx = prompt.rstrip()
    lead = prompt[len(ctx):] + separator
    ids = token_ids(tokenizer, [ctx] + [ctx + lead + str(v) for v in values_of(rule)])
    n = len(ids[0])
    return [whole[n:] for whole in ids[1:]]


def rule_clash(tokenizer, prompt: str, separator: str, rule: str) -> tuple[str, str] | None:
    """Two values of ``rule`` whose tokens after ``prompt`` clash (the first a proper prefix of the
    second), or None."""
    pair = prefix_pair(values_encoded(tokenizer, prompt, separator, rule))
    vals = values_of(rule)
    return None if pair is None else (str(vals[pair[0]]), str(vals[pair[1]]))


def choose_rule(tokenizer, prompt: str, separator: str, what: str = "the model") -> str:
    """The first value rule (0-99, then 10-99) under which no value's tokens after ``prompt`` are a
    proper prefix of another's; ProbeError, one line, where none is."""
    clashes = {}
    for rule in VALUE_RULES:
        clash = rule_clash(tokenizer, prompt, separator, rule)
        if clash is None:
            return rule
        clashes[rule] = clash
    said = "; ".join(f"{r}: {a!r} is a prefix of {b!r}" for r, (a, b) in clashes.items())
    raise ProbeError(f"no KV value rule suits {what}'s tokenizer after {prompt[-30:]!r} + {separator!r} ({said}): "
                     "a value would be a prefix of another and could never be chosen")
