"""Every pair of a model's top heads ablated together on the KV probe, against independence; the
smallest head sets that take retrieval to chance, by exhaustive search over the candidate pool."""
import pandas as pd

from gna.io import sha256_file, write_csv
from gna.models import load_model
from gna.jobs.script_job import job, provenance
from gna.probes.kv import read_jsonl
from gna.probes.scoring import encode, score
from gna.questions.pairs import candidate_pool, minimal_sets, pair_interactions

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    model, tok = load_model(p.spec)
    examples = read_jsonl(snakemake.input.probe)
    encoded = encode(examples[:p.n_examples or len(examples)], tok)  # the probe's first n_examples prompts
    ranking = pd.read_csv(snakemake.input.ranking)
    batching = dict(batch_size=p.batch_size, max_rows=p.max_rows)
    baseline = score(model, encoded, batch_size=p.batch_size)
    pairs = pair_interactions(model, encoded, ranking, p.top, model_name=w.model, baseline=baseline, **batching)
    log.info("pairs of the top %d heads:\n%s", p.top, pairs.to_string())
    pool, rule = candidate_pool(model, encoded, ranking, p.candidates, baseline, **batching)
    log.info("candidate pool, %s: %s", rule, pool)
    minimal = minimal_sets(model, encoded, ranking, pool, chance=1 / encoded.n_choices, margin=p.chance_margin,
                           max_size=p.max_size, model_name=w.model, pool_rule=rule, baseline=baseline, **batching)
    log.info("smallest sets:\n%s", minimal.to_string())
    tags = dict(probe=str(snakemake.input.probe), probe_sha256=sha256_file(snakemake.input.probe), **provenance())
    write_csv(pairs.assign(**tags), snakemake.output.pairs)
    write_csv(minimal.assign(**tags), snakemake.output.minimal)
