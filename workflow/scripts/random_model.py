"""Build a random-init tiny model (smoke tests, benchmarks) and save it like a HF model,
with the micro world's word-level tokenizer (it covers the KV probe and every micro task)."""

from gna.io import atomic_path
from gna.micro.tasks import micro_vocabulary
from gna.micro.tokenizer import word_level_tokenizer
from gna.micro.world import WorldConfig
from gna.models.tiny import build_tiny_model
from gna.jobs.script_job import job

with job(snakemake) as log:
    spec = dict(snakemake.params.spec)
    family = spec.pop("family")
    seed = spec.pop("seed", snakemake.params.seed)
    tok = word_level_tokenizer(micro_vocabulary(WorldConfig()))
    model = build_tiny_model(family, seed=seed, vocab_size=len(tok), **spec)
    with atomic_path(snakemake.output[0], directory=True) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    log.info("saved a random %s model (%d parameters)", family, sum(p.numel() for p in model.parameters()))
