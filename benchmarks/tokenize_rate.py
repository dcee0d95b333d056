"""Tokens per second of rule distill_tokens' path (stream -> tokenize -> pack -> shards), offline.

    python benchmarks/tokenize_rate.py [N_DOCS]

A byte-level BPE tokenizer (32k merges, trained here on the text itself, as Llama-3's is a byte-level
BPE) over N_DOCS local JSON-lines documents read through datasets' streaming loader, the same
WebStream and shard writer the rule runs. The Hub's download is not part of it. Measured here: 4.4e5 tokens/s with
TOKENIZERS_PARALLELISM=false, the rate gna.plan assumes (estimate.TOKENIZE_RATE = 4e5).
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path


def main(n_docs: int = 4000) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from gna.hybrid.study.token_shards import write_token_shards
    from gna.hybrid.study.web_stream import WebStream

    rng = random.Random(0)
    words = [("".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(rng.randint(2, 9))))
             for _ in range(5000)]
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(200, 1200))) + "." for _ in range(n_docs)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.jsonl"
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        bpe.train_from_iterator(docs[:500], trainers.BpeTrainer(vocab_size=32000, special_tokens=["<s>", "</s>"]))
        tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>")
        stream = WebStream(tok, [{"path": "json", "data_files": str(path)}], seq_len=2048, batch_size=256)
        start = time.time()
        rows = 1000  # ~2M tokens: fewer than the documents hold (~4M)
        write_token_shards(stream, Path(tmp) / "out", rows=rows, progress=False)
        secs = time.time() - start
    print(f"{rows * 2048:,} tokens in {secs:.1f} s: {rows * 2048 / secs:,.0f} tokens/s (one process)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4000)
