"""Path patching: each top Gather head's output removed only from each top Aggregate head's query, key
or value, at every position, the value tokens or the final positions; its direct path to the logits."""
import pandas as pd

from gna.io import sha256_file, write_csv
from gna.models import load_model
from gna.jobs.script_job import job, provenance
from gna.probes.kv import read_jsonl
from gna.probes.scoring import encode
from gna.questions.ga_paths import ga_matrix, top_roles
from gna.questions.paths import value_positions

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    model, tok = load_model(p.spec)
    examples = read_jsonl(snakemake.input.probe)
    encoded = encode(examples, tok)
    gathers, aggregates = top_roles(pd.read_csv(snakemake.input.ga), p.n_gather, p.n_aggregate)
    log.info("gather heads %s, aggregate heads %s", gathers, aggregates)
    rows = ga_matrix(model, encoded, gathers, aggregates, values=value_positions(examples, tok, encoded),
                     model_name=w.model, batch_size=p.batch_size, max_rows=p.max_rows)
    log.info("\n%s", rows.to_string())
    write_csv(rows.assign(probe=str(snakemake.input.probe), probe_sha256=sha256_file(snakemake.input.probe),
                          **provenance()), snakemake.output[0])
