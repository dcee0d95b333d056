"""Build a random-init tiny model (smoke tests, benchmarks) and save it like a HF model."""
from gna.io import atomic_path
from gna.micro.tokenizer import word_level_tokenizer
from gna.models.tiny import build_tiny_model
from gna.pipeline import job
from gna.probes.kv import COMPACT_KEYS

with job(snakemake) as log:
    spec = dict(snakemake.params.spec)
    family = spec.pop("family")
    seed = spec.pop("seed", snakemake.params.seed)
    tok = word_level_tokenizer([str(i) for i in range(100)] + list(COMPACT_KEYS) + ["?"])
    model = build_tiny_model(family, seed=seed, vocab_size=len(tok), **spec)
    with atomic_path(snakemake.output[0], directory=True) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    log.info("saved a random %s model (%d parameters)", family, sum(p.numel() for p in model.parameters()))
