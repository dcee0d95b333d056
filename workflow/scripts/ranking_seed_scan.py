"""The exact head scan on the KV probe of another seed (the ranking over probe seeds)."""
from gna.io import sha256_file, write_csv
from gna.models import load_model
from gna.jobs.script_job import job, provenance
from gna.probes.kv import read_jsonl
from gna.probes.scoring import encode
from gna.scan import scan

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    model, tok = load_model(p.spec)
    encoded = encode(read_jsonl(snakemake.input.probe), tok)
    ranking, _ = scan(model, encoded, batch_size=p.batch_size, max_rows=p.max_rows, model_name=w.model,
                      progress=False)
    log.info("baseline %.3f; top heads\n%s", ranking.baseline_accuracy[0], ranking.head(5).to_string())
    write_csv(ranking.assign(probe=str(snakemake.input.probe), probe_sha256=sha256_file(snakemake.input.probe),
                             **provenance()), snakemake.output[0])
