"""A word-level tokenizer for the micro world, saved beside each model like a HF tokenizer.

Words are split on spaces; a newline is a token of its own (it closes a line, the
"summary token" the Aggregate head reads). lm-eval needs a BOS or EOS token, so both exist.
"""
from __future__ import annotations

from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIALS = {"pad": "<pad>", "bos": "<s>", "eos": "</s>", "unk": "<unk>"}
NEWLINE = "\n"


def word_level_tokenizer(words: Iterable[str]) -> PreTrainedTokenizerFast:
    """Ids: pad 0, bos 1, eos 2, unk 3, newline 4, then ``words`` in the given order."""
    vocab: dict[str, int] = {}
    for w in [*SPECIALS.values(), NEWLINE, *words]:
        if w in vocab:
            continue
        if w != NEWLINE and (not w or any(c.isspace() for c in w)):
            raise ValueError(f"vocabulary word {w!r} is empty or contains white space")
        vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIALS["unk"]))
    # Newlines become tokens; spaces only separate words.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
        pre_tokenizers.Split(Regex(" +"), behavior="removed"),
    ])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=SPECIALS["bos"], eos_token=SPECIALS["eos"],
        pad_token=SPECIALS["pad"], unk_token=SPECIALS["unk"], padding_side="right",
        add_bos_token=True)
