"""Tokenize the web data stream once into shard files (rule distill_tokens; needs the Hub)."""
import os

# The only job that reads the Hub: the workflow runs offline otherwise (common.smk). Set before
# huggingface_hub and datasets are imported, which read these once, at import.
os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "0"

from gna.hybrid.study.token_shards import write_token_shards  # noqa: E402
from gna.hybrid.study.web_stream import WebStream, web_sources  # noqa: E402
from gna.models import ModelSpec  # noqa: E402
from gna.models.loading import load_tokenizer  # noqa: E402
from gna.jobs.script_job import job  # noqa: E402

with job(snakemake) as log:
    p, t = snakemake.params, snakemake.params.tokens
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if snakemake.threads > 1 else "false"
    tok = load_tokenizer(ModelSpec.from_dict(p.spec))
    data = t["data"]
    stream = WebStream(tok, web_sources(data), data["seq_len"], batch_size=256, seed=t["seed"], mixing=data["mixing"],
                       split=t["split"])
    index = write_token_shards(stream, snakemake.output[0], int(t["rows"]),
                               source={**t, "tokenizer": p.spec["path"]})
    log.info("%d rows of %d tokens in %d shards", index["rows"], index["seq_len"], len(index["shards"]))
