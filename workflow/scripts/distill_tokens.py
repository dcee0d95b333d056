"""Tokenize the web data stream once into shard files (rule distill_tokens; needs the Hub)."""
import os

from gna.experiments.distill_data import WebStream, web_sources
from gna.experiments.token_shards import write_token_shards
from gna.models import ModelSpec
from gna.models.loading import load_tokenizer
from gna.pipeline import job

with job(snakemake) as log:
    p = snakemake.params
    # the only job that reads the Hub's data sets: the workflow runs offline otherwise
    os.environ["HF_DATASETS_OFFLINE"] = "0"
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if snakemake.threads > 1 else "false"
    tok = load_tokenizer(ModelSpec.from_dict(p.spec))
    stream = WebStream(tok, web_sources(p.data), int(p.data.get("seq_len", 2048)), batch_size=256, seed=p.seed,
                       mixing=p.data.get("mixing", "sample"), split=p.split)
    index = write_token_shards(stream, snakemake.output[0], int(p.rows),
                               source={"data": p.data, "split": p.split, "seed": p.seed, "tokenizer": p.spec["path"]})
    log.info("%d rows of %d tokens in %d shards", index["rows"], index["seq_len"], len(index["shards"]))
