"""Compare the retrained micro models (and task files) with the shipped ones, byte for byte
(gna.micro.compare)."""
import json

from gna.io import atomic_open
from gna.jobs.script_job import job
from gna.micro.compare import comparison

with job(snakemake) as log:
    p = snakemake.params
    result, markdown = comparison(p.models, list(snakemake.input.retrained), snakemake.input.data, p.shipped_dir,
                                  p.shipped_data)
    with atomic_open(snakemake.output.md) as f:
        f.write(markdown)
    with atomic_open(snakemake.output.json) as f:
        json.dump(result, f, indent=1, sort_keys=True, default=str)
    for r in result["models"]:
        log.info("%s: %s", r["model"], "identical" if r["identical"] else f"differs (max abs diff {r.get('max_abs_diff')})")
